/**
 * Splits a users file into its records as its bytes arrive, without holding more than one record: a
 * JSON array of objects (the original's format) or NDJSON (one object per line), told apart by the
 * first character that is not white space. Each record comes with the byte offset just past it, where
 * reading can resume after a restart (`RecordSplitter.resumeAt`).
 *
 * It scans bytes, not characters: every byte of a multi-byte UTF-8 character is ≥ 0x80, so it can never
 * be mistaken for a quote, a brace, a bracket, a comma or a newline.
 */

export type FileFormat = 'json' | 'ndjson';

export interface FileRecord {
  /** The record's JSON text. */
  text: string;
  /** 1-based position in the file: the array index + 1, or the line number for NDJSON. */
  position: number;
  /** Byte offset just past the record: reading from there yields the records after it. */
  end: number;
}

/**
 * Deepest nesting of objects and arrays a record may have. JSON.parse reads any depth, but storing a
 * user (JSON.stringify) and the API's own body parser give out a few thousand levels down, each at a
 * depth that depends on the stack: a record past it would fail every batch it is in until the job is
 * given up. No user needs a hundred levels.
 */
export const MAX_RECORD_DEPTH = 100;

/** How deeply a JSON text nests objects and arrays (brackets inside strings do not count). */
export function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === Byte.Backslash) i++;
      else if (c === Byte.Quote) inString = false;
    } else if (c === Byte.Quote) inString = true;
    else if (c === Byte.OpenBrace || c === Byte.OpenBracket) {
      if (++depth > deepest) deepest = depth;
    } else if (c === Byte.CloseBrace || c === Byte.CloseBracket) depth--;
  }
  return deepest;
}

/** The file is not a JSON array or NDJSON at this byte offset: it is refused whole. */
export class FileFormatError extends Error {}

/** A record longer than this is refused: the splitter holds a whole record in memory. */
export const MAX_RECORD_BYTES = 1024 * 1024;

const enum Byte {
  Tab = 0x09,
  Newline = 0x0a,
  Return = 0x0d,
  Space = 0x20,
  Quote = 0x22,
  Comma = 0x2c,
  Backslash = 0x5c,
  OpenBracket = 0x5b,
  CloseBracket = 0x5d,
  OpenBrace = 0x7b,
  CloseBrace = 0x7d,
}

const isSpace = (b: number) => b === Byte.Space || b === Byte.Newline || b === Byte.Return || b === Byte.Tab;

type State =
  /** Before the first significant byte (a BOM is skipped). */
  | 'start'
  /** JSON array: where an element must come (after `[` or `,`). */
  | 'element'
  /** JSON array: after `[`, where an element or `]` may come. */
  | 'firstElement'
  /** JSON array: inside an element. */
  | 'inElement'
  /** JSON array: after an element, where `,` or `]` must come. */
  | 'afterElement'
  /** JSON array: after `]`; only white space may follow. */
  | 'done'
  /** NDJSON: reading lines. */
  | 'lines';

const BOM = [0xef, 0xbb, 0xbf];

export class RecordSplitter {
  private state: State;
  private format: FileFormat | undefined;
  /** Absolute offset of the next byte pushed. */
  private offset: number;
  private recordsRead: number;
  /** The bytes of the record under way, from earlier chunks. */
  private held: Buffer[] = [];
  private heldBytes = 0;
  // Inside an element: nesting depth, and whether in a string (and just after a backslash in one).
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** The element under way is a bare value (a number, true…), which ends at `,`, `]` or white space. */
  private bare = false;
  private bomSeen = 0;
  private leadingLines = 0;

  /**
   * A splitter for a whole file, or, with `resume`, for the rest of one from the offset just past the
   * record at `position` (as a FileRecord gave them).
   */
  constructor(resume?: { format: FileFormat; end: number; position: number }) {
    this.offset = resume?.end ?? 0;
    this.recordsRead = resume?.position ?? 0;
    this.format = resume?.format;
    if (!resume || resume.end === 0) this.state = 'start';
    else this.state = resume.format === 'ndjson' ? 'lines' : 'afterElement';
  }

  /** Records (or NDJSON lines) read so far, the file's own before a resume included. */
  get position(): number {
    return this.recordsRead;
  }

  /** The file's format, once its first significant byte was seen. */
  get fileFormat(): FileFormat | undefined {
    return this.format;
  }

  /** Records completed by this chunk. */
  push(chunk: Buffer): FileRecord[] {
    const records: FileRecord[] = [];
    // Where the record under way began in this chunk; 0 when it began in an earlier one.
    let recordStart = this.state === 'inElement' || this.state === 'lines' ? 0 : -1;
    for (let i = 0; i < chunk.length; i++) {
      if (this.state === 'lines') {
        // A line ends at its newline: found by indexOf, not byte by byte.
        const newline = chunk.indexOf(Byte.Newline, i);
        const lineEnd = newline < 0 ? chunk.length : newline;
        if (this.heldBytes + lineEnd - recordStart > MAX_RECORD_BYTES) throw this.tooLong();
        if (newline < 0) break;
        const record = this.finishLine(chunk, recordStart, newline);
        if (record) records.push(record);
        recordStart = newline + 1;
        i = newline;
        continue;
      }
      const b = chunk[i]!;
      switch (this.state) {
        case 'start':
          if (this.bomSeen < 3 && this.offset + i === this.bomSeen && b === BOM[this.bomSeen]) {
            this.bomSeen++;
            break;
          }
          if (b === Byte.Newline) this.leadingLines++;
          if (isSpace(b)) break;
          if (b === Byte.OpenBracket) {
            this.format = 'json';
            this.state = 'firstElement';
          } else if (b === Byte.OpenBrace) {
            this.format = 'ndjson';
            this.state = 'lines';
            // Blank lines before the first user still count in the line numbers.
            this.recordsRead += this.leadingLines;
            recordStart = i;
            i--; // the brace is the first line's first byte
          } else {
            throw this.refuse(i, 'the users file must be a JSON array of users, or one user per line (NDJSON)');
          }
          break;
        case 'firstElement':
        case 'element':
          if (isSpace(b)) break;
          if (b === Byte.CloseBracket && this.state === 'firstElement') {
            this.state = 'done';
            break;
          }
          if (b === Byte.CloseBracket || b === Byte.Comma) throw this.refuse(i, 'a user was expected');
          this.state = 'inElement';
          recordStart = i;
          this.depth = 0;
          this.inString = false;
          this.escaped = false;
          this.bare = false;
          if (b === Byte.OpenBrace || b === Byte.OpenBracket) this.depth = 1;
          else if (b === Byte.Quote) this.inString = true;
          else this.bare = true;
          break;
        case 'inElement': {
          if (this.heldBytes + i - recordStart >= MAX_RECORD_BYTES) throw this.tooLong();
          if (this.bare) {
            if (isSpace(b) || b === Byte.Comma || b === Byte.CloseBracket) {
              records.push(this.finish(chunk, recordStart, i));
              recordStart = -1;
              this.state = 'afterElement';
              i--; // the delimiter is read in afterElement
            }
            break;
          }
          if (this.inString) {
            if (this.escaped) this.escaped = false;
            else if (b === Byte.Backslash) this.escaped = true;
            else if (b === Byte.Quote) {
              this.inString = false;
              if (this.depth === 0) {
                records.push(this.finish(chunk, recordStart, i + 1));
                recordStart = -1;
                this.state = 'afterElement';
              }
            }
            break;
          }
          if (b === Byte.Quote) this.inString = true;
          else if (b === Byte.OpenBrace || b === Byte.OpenBracket) this.depth++;
          else if (b === Byte.CloseBrace || b === Byte.CloseBracket) {
            this.depth--;
            if (this.depth === 0) {
              records.push(this.finish(chunk, recordStart, i + 1));
              recordStart = -1;
              this.state = 'afterElement';
            }
          }
          break;
        }
        case 'afterElement':
          if (isSpace(b)) break;
          if (b === Byte.Comma) this.state = 'element';
          else if (b === Byte.CloseBracket) this.state = 'done';
          else throw this.refuse(i, "',' or ']' was expected after a user");
          break;
        case 'done':
          if (!isSpace(b)) throw this.refuse(i, 'nothing may follow the array of users');
          break;
      }
    }
    if ((this.state === 'inElement' || this.state === 'lines') && recordStart >= 0 && recordStart < chunk.length) {
      const rest = chunk.subarray(recordStart);
      this.held.push(rest);
      this.heldBytes += rest.length;
    }
    this.offset += chunk.length;
    return records;
  }

  /** Call after the last chunk: the last NDJSON line without a newline, or a refusal of a cut-off file. */
  end(): FileRecord[] {
    switch (this.state) {
      case 'lines': {
        if (this.heldBytes === 0) return [];
        const record = this.finishLine(Buffer.alloc(0), 0, 0);
        return record ? [record] : [];
      }
      case 'done':
        return [];
      case 'start':
        throw new FileFormatError('the users file is empty');
      case 'inElement':
        throw new FileFormatError(`the users file ends inside record ${this.recordsRead + 1}`);
      default:
        throw new FileFormatError('the users file ends before the array of users is closed');
    }
  }

  private finish(chunk: Buffer, from: number, to: number): FileRecord {
    const piece = chunk.subarray(from, to);
    const bytes = this.heldBytes > 0 ? Buffer.concat([...this.held, piece]) : piece;
    this.held = [];
    this.heldBytes = 0;
    this.recordsRead++;
    return { text: bytes.toString('utf8'), position: this.recordsRead, end: this.offset + to };
  }

  /** An NDJSON line from `from` to the newline at `to`; undefined for a blank line (which still counts). */
  private finishLine(chunk: Buffer, from: number, to: number): FileRecord | undefined {
    const record = this.finish(chunk, from, to);
    // A line's end is past its newline, where the next line starts.
    const end = this.offset + to + (to < chunk.length ? 1 : 0);
    const text = record.text.trim();
    if (text === '') return undefined;
    return { text, position: record.position, end };
  }

  private tooLong(): FileFormatError {
    return new FileFormatError(`record ${this.recordsRead + 1} is longer than ${MAX_RECORD_BYTES} bytes`);
  }

  private refuse(index: number, reason: string): FileFormatError {
    return new FileFormatError(`${reason} (at byte ${this.offset + index})`);
  }
}
