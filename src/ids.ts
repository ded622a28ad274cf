import { randomBytes } from 'node:crypto';

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
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

/** Identifier formats of the original (compat notes §0). */
export const newId = {
  eventStream: () => `est_${randomString(BASE58, 22)}`,
  event: () => `evt_${randomString(BASE58, 22)}`,
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
