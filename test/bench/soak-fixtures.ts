/**
 * Small soak runs in code, for testing the judge without a server: histories as protobuf History objects (as
 * `fetchHistory` gives them) and the mock's journal, both built event by event, good by default so that each test
 * seeds one defect.
 */
import * as proto from '@temporalio/proto';
import type { JournalCallback, JournalPrompt, JournalTune, JournalUpload, MockJournal } from '../../src/mock-service';
import type { History } from '../../bench/soak/judge';
import type { SoakJob } from '../../bench/soak/jobs';

/** An event with plain numbers where protobuf types say Long: protobufjs encodes both. */
type HistoryEvent = Record<string, unknown>;
const EventType = proto.temporal.api.enums.v1.EventType;

/** Milliseconds since the epoch where every fixture run starts. */
export const T0 = Date.parse('2026-01-01T00:00:00.000Z');

const payloads = (value: unknown) => ({
  payloads: [{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(value), 'utf8') }],
});
const time = (ms: number) => ({ seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 });

/**
 * A history under construction; times are milliseconds since T0.
 *
 * @example
 * const history = new HistoryFixture().task(10).activity('createTune', 20).signal('tuneTrained', { id: 100 }, 900)
 *   .task(910).completed({ tune: { id: 100 }, prompts: [] }, 920).history();
 */
export class HistoryFixture {
  private readonly events: HistoryEvent[] = [];
  private lastCompleted = 0;

  constructor(input: unknown = {}) {
    this.add(0, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, {
      workflowExecutionStartedEventAttributes: { workflowType: { name: 'trainThenGenerate' }, input: payloads(input) },
    });
  }

  private add(at: number, eventType: proto.temporal.api.enums.v1.EventType, attributes: HistoryEvent): number {
    const eventId = this.events.length + 1;
    this.events.push({ eventId, eventTime: time(T0 + at), eventType, ...attributes });
    return eventId;
  }

  /** A workflow task scheduled, started and completed at `at`. */
  task(at: number): this {
    const scheduled = this.add(at, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, {
      workflowTaskScheduledEventAttributes: {},
    });
    const started = this.add(at, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, {
      workflowTaskStartedEventAttributes: { scheduledEventId: scheduled },
    });
    this.lastCompleted = this.add(at, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, {
      workflowTaskCompletedEventAttributes: { scheduledEventId: scheduled, startedEventId: started },
    });
    return this;
  }

  /** An activity scheduled by the last workflow task, with `input`, completed at once with `result`. */
  activity(name: string, at: number, input: unknown = {}, result: unknown = {}): this {
    const scheduled = this.add(at, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, {
      activityTaskScheduledEventAttributes: {
        activityType: { name },
        input: payloads(input),
        workflowTaskCompletedEventId: this.lastCompleted,
      },
    });
    this.add(at, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, {
      activityTaskCompletedEventAttributes: { scheduledEventId: scheduled, result: payloads(result) },
    });
    return this;
  }

  /** An activity scheduled by the last workflow task, with `input`, failed at once with an ApplicationFailure of `type`. */
  failedActivity(name: string, at: number, input: unknown, type: string): this {
    const scheduled = this.add(at, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, {
      activityTaskScheduledEventAttributes: {
        activityType: { name },
        input: payloads(input),
        workflowTaskCompletedEventId: this.lastCompleted,
      },
    });
    this.add(at, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED, {
      activityTaskFailedEventAttributes: {
        scheduledEventId: scheduled,
        failure: { message: type, applicationFailureInfo: { type, nonRetryable: true } },
      },
    });
    return this;
  }

  signal(name: string, payload: unknown, at: number): this {
    this.add(at, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, {
      workflowExecutionSignaledEventAttributes: { signalName: name, input: payloads(payload) },
    });
    return this;
  }

  completed(result: unknown, at: number): this {
    this.add(at, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, {
      workflowExecutionCompletedEventAttributes: {
        result: payloads(result),
        workflowTaskCompletedEventId: this.lastCompleted,
      },
    });
    return this;
  }

  /** Failed with an ApplicationFailure of `type` (none: an untyped failure) and its details. */
  failed(failure: { type?: string; message: string; details?: unknown }, at: number): this {
    const { type, message, details } = failure;
    this.add(at, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, {
      workflowExecutionFailedEventAttributes: {
        failure: {
          message,
          applicationFailureInfo:
            type === undefined
              ? undefined
              : { type, nonRetryable: true, details: details === undefined ? undefined : payloads(details) },
        },
        workflowTaskCompletedEventId: this.lastCompleted,
      },
    });
    return this;
  }

  /** Terminated by the server (or an operator), with its reason. */
  terminated(reason: string, at: number): this {
    this.add(at, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, {
      workflowExecutionTerminatedEventAttributes: { reason },
    });
    return this;
  }

  history(): History {
    return { events: this.events } as History;
  }
}

/** A journal under construction: every tune trained and every prompt settled unless told otherwise. */
export class JournalFixture {
  readonly tunes: JournalTune[] = [];
  readonly prompts: JournalPrompt[] = [];
  readonly uploads: JournalUpload[] = [];
  readonly callbacks: JournalCallback[] = [];

  tune(id: number, title: string, at: { trainedAt?: number | null; neverTrains?: boolean } = {}): this {
    const trainedAt = at.neverTrains ? null : at.trainedAt === undefined ? T0 + 900 : at.trainedAt;
    this.tunes.push({
      id,
      title,
      packId: null,
      createdAt: T0 + 20,
      trainedAt,
      neverTrains: at.neverTrains ?? false,
      deletedAt: null,
    });
    if (trainedAt !== null) this.callback('/callbacks/tune', title, [id], trainedAt);
    return this;
  }

  prompt(
    id: number,
    tuneId: number,
    text: string,
    settledAt: number | null = T0 + 1_500,
    requestTitle: string | null = null,
  ): this {
    this.prompts.push({
      id,
      tuneId,
      text,
      packId: null,
      requestTitle,
      createdAt: T0 + 1_000,
      settledAt,
      deletedAt: null,
    });
    if (settledAt !== null) this.callback('/callbacks/prompt', null, [id], settledAt);
    return this;
  }

  callback(path: string, workflowId: string | null, ids: number[], sentAt: number): this {
    this.callbacks.push({ path, workflowId, ids, sentAt, status: 200, failure: null });
    return this;
  }

  /** A file uploaded with the create of tune `tuneId` (or prompt `promptId`). */
  upload(url: string, into: { tuneId?: number; promptId?: number }): this {
    this.uploads.push({ url, uploadedAt: T0 + 10, tuneId: into.tuneId ?? null, promptId: into.promptId ?? null });
    return this;
  }

  journal(): MockJournal {
    return { tunes: this.tunes, prompts: this.prompts, uploads: this.uploads, callbacks: this.callbacks };
  }
}

export const ttgJob: SoakJob = { workflowId: 'soak-t-0', kind: 'trainThenGenerate', prompts: 2 };
export const generateJob: SoakJob = { workflowId: 'soak-t-6', kind: 'generate', prompts: 1 };
export const packJob: SoakJob = {
  workflowId: 'soak-t-8',
  kind: 'packTune',
  prompts: 3,
  pack: { id: 261, name: 'dog' },
};

/** The jobs' objects on the mock: tune 100 with prompts 101 and 102; 103 on the gallery tune; pack tune 200. */
export function goodJournal(): JournalFixture {
  return new JournalFixture()
    .tune(100, ttgJob.workflowId)
    .prompt(101, 100, 'sks dog, soak portrait [soak-t-0 #0]')
    .prompt(102, 100, 'sks dog, soak portrait [soak-t-0 #1]')
    .prompt(103, 1504944, 'sks dog, soak portrait [soak-t-6 #0]')
    .tune(200, packJob.workflowId)
    .prompt(201, 200, 'a pet pack prompt')
    .prompt(202, 200, 'a pet pack prompt')
    .prompt(203, 200, 'a pet pack prompt')
    .callback('/callbacks/pack-prompts', packJob.workflowId, [201, 202, 203], T0 + 1_500);
}

/** A trainThenGenerate run up to its prompts settling, as callbacks drive it. */
export function ttgUntilSettled(signal = 'promptSettled'): HistoryFixture {
  return new HistoryFixture()
    .task(10)
    .activity('createTune', 20, {}, { id: 100 })
    .task(30)
    .signal(signal, signal === 'callback' ? { kind: 'tune', ids: [100] } : { id: 100 }, 910)
    .task(920)
    .activity('createPrompt', 930, {}, { id: 101 })
    .activity('createPrompt', 930, {}, { id: 102 })
    .task(940)
    .signal(signal, signal === 'callback' ? { kind: 'prompt', ids: [101] } : { id: 101 }, 1_510)
    .signal(signal, signal === 'callback' ? { kind: 'prompt', ids: [102] } : { id: 102 }, 1_510)
    .task(1_520);
}

export const ttgResult = { tune: { id: 100 }, prompts: [{ id: 101 }, { id: 102 }], cost: { mc: 0, usd: 0 } };

export function goodHistories(): Map<SoakJob, History> {
  return new Map([
    [ttgJob, ttgUntilSettled().completed(ttgResult, 1_530).history()],
    [
      generateJob,
      new HistoryFixture()
        .task(10)
        .activity('retrieveTune', 20, {}, { id: 1504944 })
        .task(30)
        .activity('createPrompt', 40, {}, { id: 103 })
        .task(50)
        .signal('promptSettled', { id: 103 }, 1_510)
        .task(1_520)
        .completed({ prompts: [{ id: 103 }] }, 1_530)
        .history(),
    ],
    [
      packJob,
      new HistoryFixture()
        .task(10)
        .activity('createPackTune', 20, {}, { id: 200 })
        .task(30)
        .signal('tuneTrained', { id: 200 }, 910)
        .task(920)
        .activity('listPrompts', 930)
        .task(940)
        .signal('packPromptsSettled', [{ id: 201 }, { id: 202 }, { id: 203 }], 1_510)
        .task(1_520)
        .completed({ tune: { id: 200 }, prompts: [{ id: 201 }, { id: 202 }, { id: 203 }] }, 1_530)
        .history(),
    ],
  ]);
}
