import tls, { type SecureContext } from 'node:tls';
import { BoundedCache } from '../bounded-cache.ts';

/** What a hostname is served with. */
export interface ServedCertificate {
  /** Tells a replaced certificate from the one already in memory. */
  fingerprint: string;
  /** PEM chain, leaf first. */
  certificate: string;
  /** PEM private key; opened only when a new secure context is built. */
  privateKey(): string;
}

/** The certificate for a hostname, or undefined for the server's default one. */
export type CertificateLookup = (hostname: string) => Promise<ServedCertificate | undefined>;

export type SniCallback = (servername: string, done: (error: Error | null, context?: SecureContext) => void) => void;

interface Entry {
  fingerprint: string | undefined;
  context: SecureContext | undefined;
  until: number;
}

/**
 * Names held: 10,000, and 64 MiB, a secure context (certificate chain and key, parsed) charged 16 KiB;
 * a name with nothing stored (the default certificate) costs its key.
 */
const ENTRY_BOUNDS = { entries: 10_000, bytes: 64 * 1024 * 1024 };
const CONTEXT_BYTES = 16 * 1024;
const HOSTNAME = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * Secure contexts per SNI name, for the HTTPS server's SNICallback. A handshake costs a map lookup
 * while its entry is fresh; after `refreshMs` the next handshake looks the name up again, so a
 * certificate replaced by another node (or the CLI) is served within that time. A context is rebuilt
 * only when the certificate's fingerprint changed. Names nothing is stored for are remembered too
 * (they get the default certificate), so unknown names cost one lookup per refresh.
 */
export class SniContexts {
  private readonly entries = new BoundedCache<Entry>(ENTRY_BOUNDS);
  private readonly loading = new Map<string, Promise<Entry>>();
  /** Bumped by forget(): a lookup that started before it must not store what it found. */
  private generation = 0;

  constructor(
    private readonly lookup: CertificateLookup,
    private readonly refreshMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  readonly callback: SniCallback = (servername, done) => {
    const name = servername.toLowerCase().replace(/\.$/, '');
    if (!HOSTNAME.test(name)) return done(null);
    const entry = this.entries.get(name);
    if (entry !== undefined && entry.until > Date.now()) return done(null, entry.context);
    this.load(name).then(
      (fresh) => done(null, fresh.context),
      () => done(null, entry?.context),
    );
  };

  /** The next handshake for this name looks it up again (after a change made by this node). */
  forget(hostname: string): void {
    this.generation += 1;
    this.entries.delete(hostname.toLowerCase());
  }

  /** Every next handshake looks its name up again (after the database was restored from a snapshot). */
  forgetAll(): void {
    this.generation += 1;
    this.entries.clear();
  }

  private load(name: string): Promise<Entry> {
    let pending = this.loading.get(name);
    if (pending === undefined) {
      const generation = this.generation;
      pending = this.build(name)
        .then(
          (entry) => {
            if (generation === this.generation) this.store(name, entry);
            return entry;
          },
          (error: unknown) => {
            this.onError(error);
            // Keep what was served (or the default) until the next refresh rather than retrying
            // the failing lookup — or certificate order — on every handshake.
            const previous = this.entries.get(name);
            if (generation === this.generation) {
              this.store(name, {
                fingerprint: previous?.fingerprint,
                context: previous?.context,
                until: Date.now() + this.refreshMs,
              });
            }
            throw error;
          },
        )
        .finally(() => this.loading.delete(name));
      this.loading.set(name, pending);
    }
    return pending;
  }

  private async build(name: string): Promise<Entry> {
    const served = await this.lookup(name);
    const until = Date.now() + this.refreshMs;
    if (served === undefined) return { fingerprint: undefined, context: undefined, until };
    const previous = this.entries.get(name);
    const context =
      previous?.context !== undefined && previous.fingerprint === served.fingerprint
        ? previous.context
        : tls.createSecureContext({ cert: served.certificate, key: served.privateKey() });
    return { fingerprint: served.fingerprint, context, until };
  }

  private store(name: string, entry: Entry): void {
    this.entries.set(name, entry, entry.context === undefined ? 0 : CONTEXT_BYTES);
  }
}
