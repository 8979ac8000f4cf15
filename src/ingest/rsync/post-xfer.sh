#!/bin/sh
# preservd's transfer recorder (src/ingest/rsync/post-xfer.sh, copied to <dataDir>/rsyncd/ at
# start-up).
#
# rsync runs it when a transfer has ended, after the client is gone (so it cannot tell the
# client anything). It turns the gate's active record into a transfer record, which the daemon's
# TransferLog delivers; a refused transfer has no active record and leaves nothing.
#
# Usage (from rsyncd.conf): post-xfer.sh ACTIVE TRANSFERS
active=$1
transfers=$2

[ $# -eq 2 ] || exit 0
case ${RSYNC_PID-} in ''|*[!0-9]*) exit 0 ;; esac
record="$active/$RSYNC_PID"
[ -f "$record" ] || exit 0
cap=
IFS= read -r cap < "$record" || :
ended=$(date +%s%3N 2>/dev/null)
case $ended in ''|*[!0-9]*) ended=$(date +%s)000 ;; esac
tmp="$transfers/.$RSYNC_PID.tmp"
{
  printf 'capability=%s\n' "$cap"
  printf 'exit_status=%s\n' "${RSYNC_EXIT_STATUS-}"
  printf 'raw_status=%s\n' "${RSYNC_RAW_STATUS-}"
  printf 'ended_at=%s\n' "$ended"
  printf 'host_addr=%s\n' "${RSYNC_HOST_ADDR-}"
  printf 'pid=%s\n' "$RSYNC_PID"
} > "$tmp" && mv -f "$tmp" "$transfers/$ended-$RSYNC_PID" && rm -f "$record"
exit 0
