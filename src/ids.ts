import { randomBytes } from 'node:crypto';

/** The base-58 alphabet of the original's ids, in the order of its characters' codes. */
export const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform random string over an alphabet: bytes past the largest multiple of its size are dropped so no letter is favoured. */
export function randomString(alphabet: string, length: number): string {
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit) out += alphabet[byte % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

const processRandom = randomBytes(5).toString('hex');
let requestCounter = 0;
let objectIdCounter = randomBytes(3).readUIntBE(0, 3);

/**
 * ObjectId layout: seconds, a per-process random part, a counter. Ids made close in time sort close
 * together, so a bulk import appends to the primary-key index instead of scattering writes over it.
 */
function objectId(): string {
  objectIdCounter = (objectIdCounter + 1) & 0xffffff;
  const seconds = Math.floor(Date.now() / 1000)
    .toString(16)
    .padStart(8, '0');
  return `${seconds}${processRandom}${objectIdCounter.toString(16).padStart(6, '0')}`;
}

const TIME_DIGITS = 8;
const TAIL_DIGITS = 14;
let sortableMs = -1;
const sortableTail: number[] = [];

/**
 * 22 base58 characters that sort as they were made within the process, like a ULID: the first 8 are
 * the time in milliseconds (58^8 ms is about 4,000 years), the other 14 random (82 bits), drawn afresh
 * each millisecond and counted up by one within it (or while the clock stands behind the last id's
 * time). Events are stored, listed and updated in the order of their ids; made in time order, their ids
 * append to the indexes keyed by them instead of scattering writes over them, and a bulk update of a
 * stream's deliveries (a redelivery), which SQLite applies in row order, walks those indexes in order
 * too.
 */
function sortableBase58(): string {
  const ms = Date.now();
  if (ms > sortableMs) {
    sortableMs = ms;
    drawTail();
  } else if (!countUp(sortableTail)) {
    sortableMs += 1;
    drawTail();
  }
  let time = '';
  for (let rest = sortableMs, i = 0; i < TIME_DIGITS; i++, rest = Math.floor(rest / 58))
    time = BASE58[rest % 58] + time;
  let tail = '';
  for (const digit of sortableTail) tail += BASE58[digit];
  return time + tail;
}

function drawTail(): void {
  const random = randomString(BASE58, TAIL_DIGITS);
  for (let i = 0; i < TAIL_DIGITS; i++) sortableTail[i] = BASE58.indexOf(random[i]!);
}

/** Adds one to base-58 digits, most significant first; false when they were all at their largest. */
function countUp(digits: number[]): boolean {
  for (let i = digits.length - 1; i >= 0; i--) {
    if (digits[i]! < 57) {
      digits[i]!++;
      return true;
    }
    digits[i] = 0;
  }
  return false;
}

/** Identifier formats of the original (compat notes §0). */
export const newId = {
  eventStream: () => `est_${randomString(BASE58, 22)}`,
  /** In the original's format (`evt_` and 22 base58 characters), sorting in the order they were made. */
  event: () => `evt_${sortableBase58()}`,
  /** A stream's Standard Webhooks signing secret (not in the original). */
  signingSecret: () => `whk_${randomString(BASE58, 22)}`,
  segment: () => `seg_${randomString(BASE58, 22)}`,
  customDomain: () => `cd_${randomString(BASE62, 16)}`,
  connection: () => `con_${randomString(BASE62, 16)}`,
  /** The original's job ids: `job_` and 16 alphanumerics. */
  job: () => `job_${randomString(BASE62, 16)}`,
  /** Outbox emails; also the file name of a development mailbox entry. */
  email: () => `msg_${randomString(BASE58, 22)}`,
  clientId: () => randomString(BASE62, 32),
  clientSecret: () => randomBytes(48).toString('base64url'),
  /** Database users: 24 hex digits laid out as the original's ObjectIds. */
  userLocalId: () => objectId(),
  keyId: () => randomString(BASE62, 22),
  /** Unique within the process and cheap: a random per-process prefix and a counter. */
  requestId: () => `${processRandom}${(requestCounter++).toString(36)}`,
};

export const idPattern = {
  eventStream: /^est_[1-9A-HJ-NP-Za-km-z]{22}$/,
  event: /^evt_[1-9A-HJ-NP-Za-km-z]{22}$/,
  signingSecret: /^whk_[1-9A-HJ-NP-Za-km-z]{22}$/,
  segment: /^seg_[1-9A-HJ-NP-Za-km-z]+$/,
  customDomain: /^cd_[0-9A-Za-z]{16}$/,
  connection: /^con_[0-9A-Za-z]{16}$/,
  job: /^job_[0-9A-Za-z]{16}$/,
  email: /^msg_[1-9A-HJ-NP-Za-km-z]{22}$/,
};
