/**
 * A callback receiver in a process of its own, for the flood tests (test/callbacks/receiver-limits.test.ts): a
 * recording signaler, the limits from TUNEFLOW_TEST_LIMITS (JSON), and one line on stdout with its URL once it
 * listens. Its memory and file descriptors are its own, so a flood is measured on it alone.
 */
import { DefaultLogger } from '@temporalio/worker';
import { startCallbackReceiver, type Signaler } from '../../src/callbacks/receiver';
import { CallbackSigner } from '../../src/callbacks/signing';

async function run(): Promise<void> {
  const signaler: Signaler = { signal: async () => 'delivered' };
  const receiver = await startCallbackReceiver({
    host: '127.0.0.1',
    port: 0,
    signer: new CallbackSigner({ secret: process.env.TUNEFLOW_CALLBACK_SECRET ?? '' }),
    signaler,
    logger: new DefaultLogger('ERROR'),
    limits: JSON.parse(process.env.TUNEFLOW_TEST_LIMITS ?? '{}'),
  });
  process.stdout.write(`${receiver.url}\n`);
  process.once('SIGTERM', () => void receiver.close().then(() => process.exit(0)));
}

run().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
