import type { Migration } from 'kysely';
import * as foundation from './001_foundation.ts';
import * as segments from './002_segments.ts';
import * as captcha from './003_captcha.ts';
import * as eventStreams from './004_event_streams.ts';
import * as customDomains from './005_custom_domains.ts';

/** Every migration, in order. Names sort in the order they must run. */
export const migrations: Record<string, Migration> = {
  '001_foundation': foundation,
  '002_segments': segments,
  '003_captcha': captcha,
  '004_event_streams': eventStreams,
  '005_custom_domains': customDomains,
};
