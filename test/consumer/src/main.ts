/**
 * A user's worker with tuneflow added by one plugin, and a portrait order run through it as a child workflow,
 * against tuneflow's mock service. Settings come from the environment; prints one JSON line with what happened.
 */
import * as net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { TuneflowPlugin } from 'tuneflow-temporal';
import { startMockService } from 'tuneflow-temporal/testing';
import { childIdOf, portraitOrder } from './workflows';

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** True when nothing listens on the port any more. */
function closed(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(true));
  });
}

async function run(): Promise<void> {
  const address = setting('TEMPORAL_ADDRESS');
  const orderId = setting('ORDER_ID');
  const callbackPort = Number(setting('CALLBACK_PORT'));
  const mock = await startMockService({ host: '127.0.0.1', trainingTime: '2s', inferenceTime: '1s' });
  const connection = await NativeConnection.connect({ address });
  const client = new Client({ connection: await Connection.connect({ address }) });
  const taskQueue = `portraits-${orderId}`;

  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowsPath: require.resolve('./workflows'),
    plugins: [
      new TuneflowPlugin({
        api: { apiKey: 'consumer-test-key', baseUrl: mock.url },
        callbacks: {
          baseUrl: `http://127.0.0.1:${callbackPort}`,
          secret: 'consumer-test-callback-secret',
          port: callbackPort,
          host: '127.0.0.1',
        },
      }),
    ],
  });
  let receiverOpenWhileRunning = false;
  const result = await worker.runUntil(async () => {
    const done = await client.workflow.execute(portraitOrder, {
      taskQueue,
      workflowId: orderId,
      args: [
        {
          customer: 'ada',
          imageUrls: ['https://example.com/ada/1.jpg'],
          prompts: [{ text: 'ohwx person, oil painting', num_images: 2 }, { text: 'ohwx person, at the beach' }],
        },
      ],
    });
    // Asked once the job is done, the worker still running: runUntil calls this before the plugin's start (its
    // receiver, its probe) has run, so asked first it could find the port not yet open.
    receiverOpenWhileRunning = !(await closed(callbackPort));
    return done;
  });
  const output = {
    result,
    childWorkflowId: childIdOf(orderId),
    stats: mock.stats(),
    // Whom each callback the mock sent was addressed to (the result carries no callback URL).
    callbackWorkflowIds: mock.journal().callbacks.map((c) => c.workflowId),
    receiverOpenWhileRunning,
    receiverClosedAfter: await closed(callbackPort),
  };
  await mock.close();
  await connection.close();
  process.stdout.write(`${JSON.stringify(output)}\n`);
}

run().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
