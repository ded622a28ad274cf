// The part of autocannon 8's programmatic API the benchmarks use (the package ships no types, and
// package.json is not ours to add @types/autocannon to).
declare module 'autocannon' {
  namespace autocannon {
    interface Options {
      url: string;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      connections?: number;
      duration?: number;
      amount?: number;
      maxOverallRequests?: number;
      timeout?: number;
      /** Requests sent in turn on each connection. */
      requests?: Array<{ method?: string; path?: string; headers?: Record<string, string>; body?: string }>;
    }
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p99: number;
    }
    interface Result {
      duration: number;
      requests: Histogram;
      latency: Histogram;
      throughput: Histogram;
      errors: number;
      timeouts: number;
      non2xx: number;
      '2xx': number;
    }
  }
  function autocannon(options: autocannon.Options): Promise<autocannon.Result>;
  export default autocannon;
}
