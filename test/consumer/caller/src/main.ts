/**
 * The shop's worker in its own namespace, running one order through tuneflow's Nexus endpoint. Settings come from the
 * environment; prints one JSON line with the order's result.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { shopOrder } from './workflows';

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

async function run(): Promise<void> {
  const address = setting('TEMPORAL_ADDRESS');
  const namespace = setting('TEMPORAL_NAMESPACE');
  const orderId = setting('ORDER_ID');
  const connection = await NativeConnection.connect({ address });
  const clientConnection = await Connection.connect({ address });
  const client = new Client({ connection: clientConnection, namespace });
  const taskQueue = 'shop';
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue,
    workflowsPath: require.resolve('./workflows'),
  });
  const result = await worker.runUntil(
    client.workflow.execute(shopOrder, {
      taskQueue,
      workflowId: orderId,
      args: [
        {
          endpoint: setting('TUNEFLOW_ENDPOINT'),
          imageUrls: [setting('IMAGE_URL')],
          prompts: [{ text: 'ohwx person, oil painting', num_images: 2 }],
        },
      ],
    }),
  );
  await clientConnection.close();
  await connection.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

run().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
