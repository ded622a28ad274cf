import { randomBytes, scrypt as scryptCallback, type BinaryLike, type ScryptOptions } from 'node:crypto';

/** The shortest password a database user may have. */
export const MIN_PASSWORD_LENGTH = 8;

/** The password policy of database connections: at least MIN_PASSWORD_LENGTH characters. */
export const isTooWeak = (password: string): boolean => password.length < MIN_PASSWORD_LENGTH;

const scrypt = (password: BinaryLike, salt: BinaryLike, keylen: number, options: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) =>
    scryptCallback(password, salt, keylen, options, (err, key) => (err ? reject(err) : resolve(key))),
  );

/** `scrypt$N$r$p$salt$key`: a fresh random salt each time, so equal passwords never share a hash. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, 32, { N: 16384, r: 8, p: 1 });
  return `scrypt$16384$8$1$${salt.toString('base64url')}$${key.toString('base64url')}`;
}
