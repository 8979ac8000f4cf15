import { isMainThread } from 'node:worker_threads';
const on = process.env.PRESERVD_TRACE !== undefined;
export function trace(label: string): void {
  if (!on) return;
  const cpu = isMainThread ? process.cpuUsage() : undefined;
  const c = cpu === undefined ? '' : ` cpu=${((cpu.user + cpu.system) / 1000).toFixed(0)}`;
  process.stderr.write(`TRACE ${(performance.timeOrigin + performance.now()).toFixed(1)} ${isMainThread ? 'M' : 'W'} ${label}${c}\n`);
}
