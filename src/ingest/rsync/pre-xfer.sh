#!/bin/sh
# preservd's upload gate (src/ingest/rsync/pre-xfer.sh, copied to <dataDir>/rsyncd/ at start-up).
#
# rsync runs it once per connection before any byte is written, with the request as the client
# typed it in RSYNC_REQUEST (`MODULE/<capability>/...`, not sanitized) and the server arguments
# in RSYNC_ARG0..N, of which the last, after ".", is the destination rsync will really use
# (sanitized: `<cap>/../x/` arrives as `x/`). Both must name the same open capability.
# Exit 1 refuses; rsync shows the client our stdout line. The gate also takes the upload slot
# (at most MAX admitted transfers at once): rsync's own "max connections" would be charged
# before anyone proved to hold a link.
#
# Usage (from rsyncd.conf): pre-xfer.sh LANDING CLOSED ACTIVE MODULE MAX
landing=$1
closed=$2
active=$3
module=$4
max=$5

refuse() {
  echo "preservd: $1"
  exit 1
}

[ $# -eq 5 ] || refuse 'internal error: the gate is misconfigured'
case ${RSYNC_PID-} in ''|*[!0-9]*) refuse 'internal error: no transfer id' ;; esac

i=0
prev=
last=
while eval "[ -n \"\${RSYNC_ARG$i+x}\" ]"; do
  eval "arg=\$RSYNC_ARG$i"
  if [ "$arg" = --sender ]; then
    refuse 'upload links are write-only: nothing can be downloaded from them'
  fi
  prev=$last
  last=$arg
  i=$((i + 1))
done

request=${RSYNC_REQUEST-}
cap=${last%%/*}
case $cap in
  ''|.|*[!0-9a-f]*) refuse "upload into your request's upload_link (rsync://HOST:PORT/$module/<capability>/)" ;;
esac
[ "$prev" = . ] || refuse 'give exactly one destination: the upload_link'
[ ${#cap} -eq 32 ] || refuse 'unknown upload link'
case $request in
  "$module/$cap"|"$module/$cap/"*) ;;
  *) refuse 'unknown upload link' ;;
esac
case "/$request/" in
  */../*) refuse 'an upload link must not contain ".."' ;;
esac
[ -d "$landing/$cap" ] || refuse 'unknown upload link, or its upload is finished'

# Record first, then look for the closed marker: LandingZone.close() writes the marker first
# and then counts records, so a transfer is either refused here or counted there.
tmp="$active/.$RSYNC_PID.tmp"
if ! { printf '%s\n' "$cap" > "$tmp" && mv -f "$tmp" "$active/$RSYNC_PID"; }; then
  rm -f "$tmp"
  refuse 'the server cannot record this transfer; try again later'
fi
if [ -e "$closed/$cap" ]; then
  rm -f "$active/$RSYNC_PID"
  refuse 'this upload is complete: no more changes are accepted'
fi
# Count after recording: two racing for the last slot may both be refused, never both admitted.
running=0
for record in "$active"/*; do
  pid=${record##*/}
  case $pid in ''|*[!0-9]*) continue ;; esac
  if kill -0 "$pid" 2>/dev/null; then running=$((running + 1)); fi
done
if [ "$running" -gt "$max" ]; then
  rm -f "$active/$RSYNC_PID"
  refuse "too many uploads at once (at most $max); try again in a minute"
fi
exit 0
