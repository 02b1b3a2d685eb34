/**
 * Compiled, never run: tuneflow's types are real types. Each `@ts-expect-error` fails the build if its line compiles,
 * so an entry point whose types decayed to `any` fails here.
 */
import { executeChild } from '@temporalio/workflow';
import { FailureType, TuneflowClient, TuneflowPlugin, type TrainThenGenerateInput } from 'tuneflow-temporal';
import { Phase, trainThenGenerate } from 'tuneflow-temporal/workflows';
import { startMockService } from 'tuneflow-temporal/testing';

export async function typeChecks(client: TuneflowClient): Promise<void> {
  const input: TrainThenGenerateInput = {
    tune: { name: 'man', image_urls: ['https://example.com/1.jpg'] },
    prompts: [],
  };
  // @ts-expect-error: a TrainThenGenerateInput needs prompts
  await executeChild(trainThenGenerate, { args: [{ tune: input.tune }] });
  const child = await executeChild(trainThenGenerate, { args: [input] });
  // @ts-expect-error: a tune's id is a number
  const id: string = child.tune.id;
  const run = await client.trainThenGenerate('order-1', input);
  const started: boolean = run.started;
  // @ts-expect-error: callbacks need their secret
  void new TuneflowPlugin({ callbacks: { baseUrl: 'https://hooks.example.com' } });
  const failure: string = FailureType.invalidInput;
  const phase: string = Phase.training;
  const mock = await startMockService({ trainingTime: '1s' });
  void [id, started, failure, phase, mock];
}
