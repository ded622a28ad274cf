import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { ChunkedJobWorker, type ChunkedJobKind } from '../../../src/background/chunked-jobs.ts';
import { createLogger } from '../../../src/logger.ts';
import { jobTotals, logLines } from '../../helpers/log-lines.ts';

interface Job {
  id: string;
  lease: string;
}

/**
 * Jobs held in memory, claimed in the order they fell due as the database stores claim them
 * (db/claim-due.ts): each one chunks of a millisecond or two, `chunks` of them.
 */
function memoryJobs(chunkMs: number) {
  const jobs = new Map<string, { due: number; leased: string | null; chunksLeft: number }>();
  const finishedOrder: string[] = [];
  let leases = 0;
  let running = 0;
  let mostAtOnce = 0;
  const runningIds = new Set<string>();
  let ranTwiceAtOnce = false;
  const kind: ChunkedJobKind<Job, number> = {
    name: 'test job',
    finished: 'test job done',
    logFields: (job) => ({ event_stream_id: job.id }),
    cursorOf: () => 0,
    async claimDue(_leaseMs, limit) {
      return [...jobs.entries()]
        .filter(([, j]) => j.leased === null && j.due <= Date.now())
        .sort(([, a], [, b]) => a.due - b.due)
        .slice(0, limit)
        .map(([id, j]) => {
          j.leased = `lease ${++leases}`;
          return { id, lease: j.leased };
        });
    },
    async runChunk(job, newLease, cursor) {
      const held = jobs.get(job.id);
      if (held?.leased !== job.lease) return undefined;
      mostAtOnce = Math.max(mostAtOnce, ++running);
      if (runningIds.has(job.id)) ranTwiceAtOnce = true;
      runningIds.add(job.id);
      await sleep(chunkMs);
      runningIds.delete(job.id);
      running--;
      held.chunksLeft--;
      if (held.chunksLeft === 0) {
        jobs.delete(job.id);
        finishedOrder.push(job.id);
        return { rows: 1, finished: true, cursor: cursor + 1 };
      }
      held.leased = newLease;
      return { rows: 1, finished: false, cursor: cursor + 1 };
    },
    async release(job, lease, at) {
      const held = jobs.get(job.id);
      if (held?.leased !== lease) return;
      held.leased = null;
      held.due = Date.parse(at);
    },
  };
  const queue = (id: string, chunks: number) => jobs.set(id, { due: Date.now(), leased: null, chunksLeft: chunks });
  return {
    kind,
    queue,
    finishedOrder,
    left: () => jobs.size,
    mostAtOnce: () => mostAtOnce,
    ranTwiceAtOnce: () => ranTwiceAtOnce,
  };
}

describe('jobs done in chunks', () => {
  it('a long job hands its turn on, so a job queued while it runs is not kept waiting for all of it', async () => {
    const logs = logLines();
    const memory = memoryJobs(2);
    const worker = new ChunkedJobWorker(memory.kind, createLogger({ logLevel: 'info' }, { stream: logs.stream }), 50);
    memory.queue('long', 200);
    worker.start();
    try {
      await sleep(20);
      memory.queue('short', 3);
      worker.wake();
      for (let i = 0; i < 500 && memory.left() > 0; i++) await sleep(10);
      assert.equal(memory.left(), 0, 'both jobs ended');
      assert.deepEqual(memory.finishedOrder, ['short', 'long']);
      const long = jobTotals(logs.lines, { name: 'test job', finished: 'test job done', streamId: 'long' });
      assert.ok(long && long.turns > 1, `the long job took turns: ${JSON.stringify(long)}`);
      assert.deepEqual([long.chunks, long.rows], [200, 200], 'its lines add up to the whole job');
      // Its three chunks, in one turn or (on a loaded machine, three chunks past the 50 ms turn) two.
      const short = jobTotals(logs.lines, { name: 'test job', finished: 'test job done', streamId: 'short' });
      assert.deepEqual([short?.chunks, short?.rows], [3, 3]);
    } finally {
      await worker.stop();
    }
  });

  for (const concurrency of [1, 2, 3]) {
    it(`runs ${concurrency} job${concurrency > 1 ? 's' : ''} of a kind at a time when its kind says so`, async () => {
      const memory = memoryJobs(5);
      const kind = concurrency === 1 ? memory.kind : { ...memory.kind, concurrency };
      const worker = new ChunkedJobWorker(kind, createLogger({ logLevel: 'silent' }), 1_000);
      for (const id of ['a', 'b', 'c', 'd']) memory.queue(id, 4);
      worker.start();
      try {
        for (let i = 0; i < 500 && memory.left() > 0; i++) await sleep(10);
        assert.equal(memory.left(), 0, 'every job ended');
        assert.equal(memory.mostAtOnce(), concurrency);
        assert.equal(memory.ranTwiceAtOnce(), false, 'no job ran beside itself');
      } finally {
        await worker.stop();
      }
    });
  }
});
