import { machineCpu, machineCpuMsSince } from '../../bench/machine';

const linux = process.platform === 'linux' ? test : test.skip;

linux("machineCpuMsSince: every core's busy time since a reading, this process's work included", () => {
  const before = machineCpu();
  const cpu = process.cpuUsage();
  // Work until this process alone has used 100 ms of CPU (the machine's counter ticks every 10 ms).
  while (process.cpuUsage(cpu).user < 100_000) for (let i = 0; i < 1e5; i++) Math.sqrt(i);
  const own = process.cpuUsage(cpu);
  expect(machineCpuMsSince(before)).toBeGreaterThanOrEqual((own.user + own.system) / 1000 - 20);
});

test('machineCpuMsSince: undefined without a reading to start from', () => {
  expect(machineCpuMsSince(undefined)).toBeUndefined();
});
