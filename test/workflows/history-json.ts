/**
 * Temporal's JSON form of a workflow history (`temporal workflow show --output json`, the SDK's `historyToJSON`):
 * the form test/histories/ keeps them in.
 *
 * The SDK's own historyFromJSON/historyToJSON throw "type must be a Type" in this install: @temporalio/common and
 * @temporalio/proto each get a private copy of protobufjs 8 (the top level holds @grpc/proto-loader's protobufjs 7),
 * and the JSON codec of one copy refuses the message types of the other. Where that happens, these functions use
 * the codec of the copy @temporalio/proto's types belong to; elsewhere, the SDK's functions.
 */
import { createRequire } from 'node:module';
import { historyFromJSON, historyToJSON, type History } from '@temporalio/common/lib/proto-utils';
import * as proto from '@temporalio/proto';
import { patchProtobufRoot } from '@temporalio/proto/lib/patch-protobuf-root';

interface ProtoJson {
  fromJson(type: unknown, json: unknown, options?: { ignoreUnknownFields?: boolean }): History | null;
  toJson(type: unknown, message: unknown): unknown;
}

let codec: { protojson: ProtoJson; historyType: unknown } | undefined;

/** The JSON codec of the protobufjs copy that @temporalio/proto's types come from. */
function protoCodec() {
  if (!codec) {
    // Loaded as @temporalio/proto itself would load it.
    const requireFromProto = createRequire(require.resolve('@temporalio/proto/package.json'));
    const protojson = requireFromProto('protobufjs/ext/protojson') as ProtoJson;
    const root = patchProtobufRoot(proto) as unknown as { lookupType(name: string): unknown };
    codec = { protojson, historyType: root.lookupType('temporal.api.history.v1.History') };
  }
  return codec;
}

function isDuplicateProtobuf(err: unknown): boolean {
  return err instanceof TypeError && err.message === 'type must be a Type';
}

/** Older tools write enums in PascalCase (`WorkflowExecutionStarted`); the codec wants `EVENT_TYPE_...`. */
function constantCase(value: unknown, prefix: string): unknown {
  if (typeof value !== 'string' || value.startsWith(prefix)) return value;
  return `${prefix}_${value.replace(/(?<=.)([A-Z])/g, '_$1').toUpperCase()}`;
}

function fixEnums(json: { events: Record<string, unknown>[] }) {
  return {
    ...json,
    events: json.events.map((event) => {
      const key = Object.keys(event).find((k) => k.endsWith('EventAttributes'));
      const attributes = key ? (event[key] as Record<string, unknown>) : undefined;
      const taskQueue = attributes?.taskQueue as Record<string, unknown> | undefined;
      return {
        ...event,
        eventType: constantCase(event.eventType, 'EVENT_TYPE'),
        ...(key &&
          attributes && {
            [key]: {
              ...attributes,
              ...(taskQueue && { taskQueue: { ...taskQueue, kind: constantCase(taskQueue.kind, 'TASK_QUEUE_KIND') } }),
              ...(attributes.retryState !== undefined && {
                retryState: constantCase(attributes.retryState, 'RETRY_STATE'),
              }),
            },
          }),
      };
    }),
  };
}

/**
 * A history from its JSON form (parsed).
 *
 * @example
 * const history = historyFromJson(JSON.parse(fs.readFileSync('test/histories/pack.json', 'utf8')));
 */
export function historyFromJson(json: unknown): History {
  try {
    return historyFromJSON(json);
  } catch (err) {
    if (!isDuplicateProtobuf(err)) throw err;
  }
  const events = (json as { events?: unknown } | null)?.events;
  if (!Array.isArray(events)) throw new TypeError('Invalid history, expected an object with an array of events');
  const { protojson, historyType } = protoCodec();
  const history = protojson.fromJson(historyType, fixEnums({ events }), { ignoreUnknownFields: true });
  if (!history) throw new TypeError('Invalid history');
  return history;
}

/**
 * The JSON form of a history, as a string.
 *
 * @example
 * fs.writeFileSync('test/histories/pack.json', historyToJson(await handle.fetchHistory()));
 */
export function historyToJson(history: History): string {
  try {
    return historyToJSON(history);
  } catch (err) {
    if (!isDuplicateProtobuf(err)) throw err;
  }
  const { protojson, historyType } = protoCodec();
  const message = proto.temporal.api.history.v1.History.fromObject(history);
  return JSON.stringify(protojson.toJson(historyType, message), null, 2);
}
