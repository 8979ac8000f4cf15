/**
 * How many downloads are being answered right now. The landed hasher (ingest/landed-hasher.ts)
 * starts no work while there is one: hashing uploads in the background must never slow a
 * download, and what it has not hashed by complete is read then, as without it.
 */
export class DownloadsInFlight {
  private count = 0;

  get any(): boolean {
    return this.count > 0;
  }

  /** Counts one download until the returned function is called (more calls do nothing). */
  begin(): () => void {
    this.count++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.count--;
    };
  }
}
