import { invariant } from '../util/assert.ts';
import { credit, debit, entry, type JournalEntry } from './entry.ts';

/** A posted entry with its sequence number. */
export interface Posted extends JournalEntry {
  readonly seq: number;
  /** Sequence number of the entry this one reverses, if it is a reversal. */
  readonly reverses?: number;
}

/** An append-only journal: entries are numbered from 1 in posting order and never edited. */
export class Journal {
  readonly #entries: Posted[] = [];

  /** Posts an entry; its date may not be earlier than the last posted entry's date. */
  post(e: JournalEntry): Posted {
    const last = this.#entries.at(-1);
    invariant(
      last === undefined || e.date >= last.date,
      'E_BACKDATED',
      `entry dated ${e.date} is before the last posted entry (${last?.date})`,
    );
    const posted: Posted = Object.freeze({ ...e, seq: this.#entries.length + 1 });
    this.#entries.push(posted);
    return posted;
  }

  /** Posts the mirror image of entry `seq` on `date`; an entry can be reversed only once. */
  reverse(seq: number, date: string): Posted {
    const original = this.get(seq);
    invariant(original.reverses === undefined, 'E_REVERSE', `entry ${seq} is itself a reversal`);
    invariant(
      !this.#entries.some((p) => p.reverses === seq),
      'E_REVERSE',
      `entry ${seq} is already reversed`,
    );
    const lines = original.lines.map((l) =>
      l.side === 'debit' ? credit(l.account, l.amount) : debit(l.account, l.amount),
    );
    const mirror = entry(date, `Reversal of #${seq}: ${original.memo}`, lines);
    const posted: Posted = Object.freeze({ ...this.post(mirror), reverses: seq });
    this.#entries[posted.seq - 1] = posted;
    return posted;
  }

  get(seq: number): Posted {
    const p = this.#entries[seq - 1];
    invariant(p, 'E_NO_ENTRY', `no entry #${seq}`);
    return p;
  }

  /** Entries dated within [from, to], inclusive, in posting order. */
  between(from: string, to: string): Posted[] {
    return this.#entries.filter((p) => p.date >= from && p.date <= to);
  }

  /** Every entry in posting order. */
  entries(): readonly Posted[] {
    return this.#entries.slice();
  }

  get size(): number {
    return this.#entries.length;
  }
}
