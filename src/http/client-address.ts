import { isIPv4 } from 'node:net';

/**
 * The key a client address is counted under. IPv4 addresses (and IPv4-mapped IPv6) count one by one;
 * an IPv6 address counts as its /64, the smallest block one subscriber is usually handed, so walking
 * through the addresses of one network does not buy a fresh bucket per address.
 */
export function clientAddress(ip: string): string {
  const address = withoutPort(ip).split('%')[0]!.toLowerCase();
  if (address.startsWith('::ffff:') && isIPv4(address.slice(7))) return address.slice(7);
  if (!address.includes(':')) return address;
  const [head = '', tail] = address.split('::');
  const front = head === '' ? [] : head.split(':');
  const back = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined
      ? front
      : [...front, ...Array<string>(Math.max(0, 8 - front.length - back.length)).fill('0'), ...back];
  return `${groups
    .slice(0, 4)
    .map((group) => (parseInt(group, 16) || 0).toString(16))
    .join(':')}::/64`;
}

/**
 * The address without the port some proxies write beside it in X-Forwarded-For (`203.0.113.9:4711`,
 * `[2001:db8::1]:4711`): a client's every connection comes from another port, so counting the port
 * would hand it a fresh bucket per connection, and `a.b.c.d:port` read as IPv6 would lump unrelated
 * clients together.
 */
function withoutPort(ip: string): string {
  const bracketed = /^\[([^\]]*)\](?::\d*)?$/.exec(ip);
  if (bracketed) return bracketed[1]!;
  const colon = ip.lastIndexOf(':');
  return colon > 0 && ip.indexOf(':') === colon && isIPv4(ip.slice(0, colon)) ? ip.slice(0, colon) : ip;
}
