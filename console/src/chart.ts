import { h, svg } from './dom.ts';

export interface Bucket {
  time: string;
  delivered: number;
  failed: number;
}

const WIDTH = 720;
const HEIGHT = 160;
const AXIS = 18;

/**
 * Delivered (below) and failed (stacked above) attempts per minute from `from` to `to`, as SVG bars.
 * Minutes without attempts are absent from the API's answer and drawn as nothing. The figure's label
 * gives the totals, for readers who cannot see the bars.
 */
export function deliveryChart(buckets: Bucket[], from: string, to: string): HTMLElement {
  const start = Date.parse(from);
  const minutes = Math.max(1, Math.round((Date.parse(to) - start) / 60_000));
  const peak = Math.max(1, ...buckets.map((b) => b.delivered + b.failed));
  const step = WIDTH / minutes;
  const scale = (HEIGHT - AXIS - 4) / peak;
  const bars: SVGElement[] = [];
  for (const bucket of buckets) {
    const x = ((Date.parse(bucket.time) - start) / 60_000) * step;
    const width = Math.max(1, step - (step > 3 ? 1 : 0));
    const delivered = bucket.delivered * scale;
    const failed = bucket.failed * scale;
    const base = HEIGHT - AXIS;
    const title = `${new Date(bucket.time).toLocaleTimeString()}: ${bucket.delivered} delivered, ${bucket.failed} failed`;
    if (delivered > 0)
      bars.push(
        svg('rect', { class: 'delivered', x, y: base - delivered, width, height: delivered }, svg('title', {}, title)),
      );
    if (failed > 0)
      bars.push(
        svg(
          'rect',
          { class: 'failed', x, y: base - delivered - failed, width, height: failed },
          svg('title', {}, title),
        ),
      );
  }
  const delivered = buckets.reduce((sum, b) => sum + b.delivered, 0);
  const failed = buckets.reduce((sum, b) => sum + b.failed, 0);
  const hours = Math.round(minutes / 60);
  const summary = `Last ${hours} hour${hours === 1 ? '' : 's'}: ${delivered} delivered, ${failed} failed attempts (peak ${peak} a minute)`;
  const chart = svg(
    'svg',
    { class: 'chart', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': summary },
    ...bars,
    svg('text', { x: 2, y: HEIGHT - 4 }, new Date(from).toLocaleTimeString()),
    svg('text', { x: WIDTH - 2, y: HEIGHT - 4, 'text-anchor': 'end' }, new Date(to).toLocaleTimeString()),
    svg('text', { x: 2, y: 12 }, `${peak}/min`),
  );
  return h(
    'figure',
    {},
    chart,
    h(
      'figcaption',
      { class: 'legend' },
      h('span', { class: 'delivered' }, '■ delivered'),
      ' · ',
      h('span', { class: 'failed' }, '■ failed'),
      ` — ${summary}`,
    ),
  );
}
