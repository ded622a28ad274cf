import dns from 'node:dns';
import { Resolver } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';

/**
 * Keeps webhooks from reaching the server's own networks (SSRF): an endpoint's host must be, and
 * resolve only to, public addresses unless the operator allow-listed it. The same check runs when a
 * stream is saved and, through `lookup`, on every connection the delivery agent opens, so the
 * address connected to is the address checked and a name re-pointed after the stream was saved
 * (DNS rebinding) is caught at delivery.
 */

/** The endpoint's host is not public and not allowed: sending would not help, now or later. */
export class EndpointRefused extends Error {
  override name = 'EndpointRefused';
}

/** The endpoint's host did not resolve: perhaps a passing DNS failure, worth another attempt. */
export class EndpointUnresolved extends Error {
  override name = 'EndpointUnresolved';
}

// ---------------------------------------------------------------------------------------------
// Addresses

type Range = readonly [network: bigint, prefix: number, label: string];

function ipv4Bits(ip: string): bigint {
  return ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

/** 128 bits of an IPv6 address (with `::` and an optional dotted IPv4 tail; a zone id is dropped). */
function ipv6Bits(ip: string): bigint {
  let text = ip.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = ipv4Bits(dotted[1]!);
    text = `${text.slice(0, dotted.index)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined
      ? headGroups
      : [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  return groups.reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n);
}

const v4 = (network: string, prefix: number, label: string): Range => [ipv4Bits(network), prefix, label];
const v6 = (network: string, prefix: number, label: string): Range => [ipv6Bits(network), prefix, label];

/** IANA's special-purpose IPv4 ranges that are not globally reachable, plus multicast and class E. */
const IPV4_RANGES: readonly Range[] = [
  v4('0.0.0.0', 8, 'unspecified'),
  v4('10.0.0.0', 8, 'private'),
  v4('100.64.0.0', 10, 'shared (CGNAT)'),
  v4('127.0.0.0', 8, 'loopback'),
  v4('169.254.0.0', 16, 'link-local'),
  v4('172.16.0.0', 12, 'private'),
  v4('192.0.0.0', 24, 'IETF protocol'),
  v4('192.0.2.0', 24, 'documentation'),
  v4('192.88.99.0', 24, '6to4 relay'),
  v4('192.168.0.0', 16, 'private'),
  v4('198.18.0.0', 15, 'benchmarking'),
  v4('198.51.100.0', 24, 'documentation'),
  v4('203.0.113.0', 24, 'documentation'),
  v4('224.0.0.0', 4, 'multicast'),
  v4('255.255.255.255', 32, 'broadcast'),
  v4('240.0.0.0', 4, 'reserved'),
];

/** Non-public IPv6 ranges inside 2000::/3 (global unicast); everything outside it is refused too. */
const IPV6_RANGES: readonly Range[] = [
  v6('::', 128, 'unspecified'),
  v6('::1', 128, 'loopback'),
  v6('64:ff9b:1::', 48, 'private (local-use NAT64)'),
  v6('100::', 64, 'discard-only'),
  v6('2001:db8::', 32, 'documentation'),
  v6('2001::', 23, 'IETF protocol'),
  v6('3fff::', 20, 'documentation'),
  v6('fc00::', 7, 'unique-local'),
  v6('fe80::', 10, 'link-local'),
  v6('fec0::', 10, 'site-local'),
  v6('ff00::', 8, 'multicast'),
];
const GLOBAL_UNICAST = v6('2000::', 3, 'global unicast');

const within = (bits: bigint, width: number, [network, prefix]: Range): boolean =>
  bits >> BigInt(width - prefix) === network >> BigInt(width - prefix);

/**
 * The IPv4 address an IPv6 address stands for, when it embeds one that a connection may end up at:
 * IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
 */
function embeddedIpv4(bits: bigint): { ipv4: bigint; via: string } | undefined {
  if (bits >> 32n === 0xffffn) return { ipv4: bits & 0xffffffffn, via: 'IPv4-mapped' };
  if (bits >> 32n === 0x64ff9b0000000000000000n) return { ipv4: bits & 0xffffffffn, via: 'NAT64' };
  if (bits >> 112n === 0x2002n) return { ipv4: (bits >> 80n) & 0xffffffffn, via: '6to4' };
  return undefined;
}

const formatIpv4 = (bits: bigint): string =>
  [24n, 16n, 8n, 0n].map((shift) => Number((bits >> shift) & 0xffn)).join('.');

/** The IPv4 address behind an IPv4-mapped IPv6 address, else the address itself. */
function unmapped(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  const bits = ipv6Bits(ip);
  return bits >> 32n === 0xffffn ? formatIpv4(bits & 0xffffffffn) : ip;
}

/** Why `ip` is not a public address ("loopback", "private", …), or undefined when it is. */
export function nonPublicRange(ip: string): string | undefined {
  const family = isIP(ip);
  if (family === 4) return IPV4_RANGES.find((range) => within(ipv4Bits(ip), 32, range))?.[2];
  if (family !== 6) return 'invalid';
  const bits = ipv6Bits(ip);
  const embedded = embeddedIpv4(bits);
  if (embedded !== undefined) {
    const range = IPV4_RANGES.find((r) => within(embedded.ipv4, 32, r))?.[2];
    return range === undefined ? undefined : `${embedded.via} ${range}`;
  }
  const range = IPV6_RANGES.find((r) => within(bits, 128, r));
  if (range) return range[2];
  return within(bits, 128, GLOBAL_UNICAST) ? undefined : 'reserved';
}

// ---------------------------------------------------------------------------------------------
// The allow list (DELIVERY_ALLOWED_HOSTS)

type AllowEntry =
  | { kind: 'host'; name: string }
  | { kind: 'suffix'; suffix: string }
  | { kind: 'network'; family: 4 | 6; range: Range };

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

function parseEntry(raw: string): AllowEntry | string {
  const entry = raw
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  const [address = '', prefixText, extra] = entry.split('/');
  const family = isIP(address);
  if (family === 4 || family === 6) {
    const width = family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? width : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
    if (extra !== undefined || !(prefix >= 0 && prefix <= width))
      return `"${raw}" is not a valid CIDR (prefix 0-${width})`;
    const bits = family === 4 ? ipv4Bits(address) : ipv6Bits(address);
    return { kind: 'network', family, range: [bits, prefix, entry] };
  }
  if (entry.startsWith('*.') && HOSTNAME.test(entry.slice(2))) return { kind: 'suffix', suffix: entry.slice(1) };
  if (HOSTNAME.test(entry)) return { kind: 'host', name: entry };
  return `"${raw}" is neither a hostname, *.domain, an IP address nor a CIDR`;
}

/** Why an allow-list entry is malformed, or undefined when it is fine (for the configuration's checks). */
export function allowListEntryError(raw: string): string | undefined {
  const parsed = parseEntry(raw);
  return typeof parsed === 'string' ? parsed : undefined;
}

const normalHost = (hostname: string): string =>
  hostname
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');

// ---------------------------------------------------------------------------------------------
// The guard

export interface EndpointGuardOptions {
  /** Hostnames, `*.domain` suffixes, IP addresses and CIDRs that may be reached although not public. */
  allowedHosts: readonly string[];
  /** Resolvers to ask (`ip`, `ip:port`); empty: the system's resolver (getaddrinfo, /etc/hosts). */
  dnsServers: readonly string[];
  /** Timeout of one DNS query when `dnsServers` are given. */
  timeoutMs?: number;
}

export class EndpointGuard {
  private readonly allowed: AllowEntry[];
  /** Asks the configured `dnsServers`; undefined: the system's resolver. */
  private readonly resolver: Resolver | undefined;

  constructor(options: EndpointGuardOptions) {
    this.allowed = options.allowedHosts.map((raw) => {
      const parsed = parseEntry(raw);
      if (typeof parsed === 'string') throw new TypeError(`DELIVERY_ALLOWED_HOSTS: ${parsed}`);
      return parsed;
    });
    if (options.dnsServers.length > 0) {
      this.resolver = new Resolver({ timeout: options.timeoutMs ?? 2_000, tries: 2 });
      this.resolver.setServers([...options.dnsServers]);
    }
  }

  /**
   * When a stream is saved: throws EndpointRefused or EndpointUnresolved unless the host (a URL's
   * hostname; IPv6 in brackets is fine) is allowed by name or resolves only to reachable addresses.
   */
  async check(hostname: string): Promise<void> {
    if (this.hostAllowed(normalHost(hostname))) return;
    await this.vet(hostname);
  }

  /** The addresses of `hostname`, when every one may be reached; throws EndpointRefused or EndpointUnresolved otherwise. */
  async vet(hostname: string): Promise<string[]> {
    const host = normalHost(hostname);
    const addresses = await this.resolve(host);
    if (this.hostAllowed(host)) return addresses;
    for (const address of addresses) {
      if (this.addressAllowed(address)) continue;
      const range = nonPublicRange(address);
      if (range === undefined) continue;
      const what = isIP(host) ? `${host} is` : `${host} resolves to ${address},`;
      throw new EndpointRefused(`${what} a non-public address (${range})`);
    }
    return addresses;
  }

  /**
   * A `lookup` for net/tls connections: the agent connects to exactly the addresses vetted here. Hosts
   * given as IP addresses never reach a lookup; `vet` them before connecting.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.vet(hostname).then(
      (addresses) => {
        const family =
          options.family === 4 || options.family === 'IPv4'
            ? 4
            : options.family === 6 || options.family === 'IPv6'
              ? 6
              : 0;
        const usable = addresses
          .filter((a) => family === 0 || isIP(a) === family)
          .map((address) => ({ address, family: isIP(address) }));
        const first = usable[0];
        if (first === undefined) callback(new EndpointUnresolved(`${hostname} has no IPv${family} address`), '');
        else if (options.all) callback(null, usable);
        else callback(null, first.address, first.family);
      },
      (error: Error) => callback(error, ''),
    );
  };

  private hostAllowed(host: string): boolean {
    return this.allowed.some((entry) =>
      entry.kind === 'host' ? entry.name === host : entry.kind === 'suffix' ? host.endsWith(entry.suffix) : false,
    );
  }

  private addressAllowed(ip: string): boolean {
    const address = unmapped(ip);
    const family = isIP(address);
    const bits = family === 4 ? ipv4Bits(address) : ipv6Bits(address);
    return this.allowed.some(
      (entry) =>
        entry.kind === 'network' && entry.family === family && within(bits, family === 4 ? 32 : 128, entry.range),
    );
  }

  private async resolve(host: string): Promise<string[]> {
    if (isIP(host)) return [host];
    // RFC 6761: localhost names are loopback, whatever a DNS server would say about them.
    if (host === 'localhost' || host.endsWith('.localhost')) return ['127.0.0.1', '::1'];
    const resolver = this.resolver;
    if (resolver === undefined) {
      try {
        const found = await dns.promises.lookup(host, { all: true, verbatim: true });
        return found.map((a) => a.address);
      } catch (error) {
        throw new EndpointUnresolved(`${host} could not be resolved (${codeOf(error)})`);
      }
    }
    const [a, aaaa] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const addresses = [
      ...(a.status === 'fulfilled' ? a.value : []),
      ...(aaaa.status === 'fulfilled' ? aaaa.value : []),
    ];
    if (addresses.length > 0) return addresses;
    const reason = a.status === 'rejected' ? a.reason : aaaa.status === 'rejected' ? aaaa.reason : 'no addresses';
    throw new EndpointUnresolved(`${host} could not be resolved (${codeOf(reason)})`);
  }
}

function codeOf(error: unknown): string {
  return (error as { code?: string } | null)?.code ?? String(error);
}

/** The guard the configuration asks for; none in development mode (DELIVERY_ALLOW_HTTP), where any address goes. */
export function endpointGuardFor(config: {
  deliveryAllowHttp: boolean;
  deliveryAllowedHosts: readonly string[];
  dnsServers: readonly string[];
}): EndpointGuard | undefined {
  if (config.deliveryAllowHttp) return undefined;
  return new EndpointGuard({ allowedHosts: config.deliveryAllowedHosts, dnsServers: config.dnsServers });
}
