/**
 * Looking at the rsync port from outside: whether it greets on its port, and what it
 * logged since it started (for a start-up error).
 */
import { open, stat } from 'node:fs/promises';
import net from 'node:net';

/** Connects and waits for rsync's `@RSYNCD:` greeting, then hangs up (the log shows a connect). */
export async function rsyncGreets(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return (await rsyncGreeting(host, port, timeoutMs)) !== undefined;
}

/** rsync's greeting line (with its newline), or undefined if none came. */
export function rsyncGreeting(host: string, port: number, timeoutMs = 1_000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let received = '';
    const finish = (): void => {
      socket.destroy();
      const line = received.slice(0, received.indexOf('\n') + 1);
      resolve(line.startsWith('@RSYNCD:') ? line : undefined);
    };
    socket.setTimeout(timeoutMs, finish);
    socket.on('error', finish);
    socket.on('close', finish);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
      if (received.includes('\n')) finish();
    });
  });
}

export async function fileSize(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch {
    return 0;
  }
}

/** The last few lines rsync logged since `from`, on one line, for a start-up error. */
export async function logTail(file: string, from: number): Promise<string> {
  try {
    const handle = await open(file, 'r');
    try {
      const { size } = await handle.stat();
      const length = Math.min(size - from, 4096);
      if (length <= 0) return '';
      const { buffer, bytesRead } = await handle.read(Buffer.alloc(length), 0, length, size - length);
      const lines = buffer.subarray(0, bytesRead).toString('utf8').split('\n').filter(Boolean);
      return lines
        .slice(-3)
        .map((l) => l.replace(/^\S+ \S+ \[\d+\] /, ''))
        .join('; ');
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}
