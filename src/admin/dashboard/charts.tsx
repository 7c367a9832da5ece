import type { HourPoint } from "../stats/series";
import { formatDuration } from "./format";

/**
 * Charts drawn on the server as inline SVG: no script, no external asset (the CSP allows neither). Each bar and
 * point carries a <title>, which browsers show on hover, and each chart a text summary for screen readers.
 */

const WIDTH = 320;
const HEIGHT = 140;
const RIGHT = 8;
const TOP = 10;
const BOTTOM = 22;
const PLOT_H = HEIGHT - TOP - BOTTOM;
/** Width of one character of the 11 px axis labels, rounded up ("m" is the widest the labels use). */
const LABEL_CHAR_W = 7;

/**
 * Where the plot starts: right of the widest value label, which ends 4 units left of it. A fixed margin cut
 * "100 ms" to "00 ms".
 */
export function plotLeft(labels: string[]): number {
  return Math.max(24, 8 + Math.ceil(Math.max(0, ...labels.map((label) => label.length)) * LABEL_CHAR_W));
}

/** The value labels of an axis from 0 to `max`: counts get a middle one only where it is a whole number. */
function ticks(max: number, whole: boolean): number[] {
  return whole && max % 2 !== 0 ? [0, max] : [0, max / 2, max];
}

function hourLabel(hour: number): string {
  return `${new Date(hour).toISOString().slice(11, 13)}:00`;
}

/** The smallest of 1, 2, 5 × 10^n at or above `value`, so the axis reads in round numbers. */
export function niceCeiling(value: number): number {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

/** The plot's frame: value labels, where the plot starts, and the width of one hour. */
function frame(points: HourPoint[], max: number, format: (value: number) => string, whole: boolean) {
  const labels = ticks(max, whole).map((tick) => ({ tick, label: format(tick) }));
  const left = plotLeft(labels.map(({ label }) => label));
  return { labels, left, step: (WIDTH - left - RIGHT) / points.length };
}

function Axes(props: { points: HourPoint[]; max: number; frame: ReturnType<typeof frame> }) {
  const { labels, left, step } = props.frame;
  return (
    <g class="axes">
      {labels.map(({ tick, label }) => {
        const y = TOP + PLOT_H - (tick / props.max) * PLOT_H;
        return (
          <>
            <line x1={left} x2={WIDTH - RIGHT} y1={y} y2={y} class="grid" />
            <text x={left - 4} y={y + 4} text-anchor="end">
              {label}
            </text>
          </>
        );
      })}
      {props.points.map((point, index) =>
        // Every sixth hour, and none so close to the right edge that it would collide with "now".
        index % 6 === 0 && index < props.points.length - 3 ? (
          <text x={left + index * step + step / 2} y={HEIGHT - 6} text-anchor="middle">
            {hourLabel(point.hour)}
          </text>
        ) : null,
      )}
      {/* The last bar is the hour in progress: the axis says so, so nobody reads it as a drop. */}
      <text x={WIDTH - RIGHT} y={HEIGHT - 6} text-anchor="end">
        now
      </text>
    </g>
  );
}

/**
 * 24 bars, one per hour, for a count such as received or dead deliveries.
 *
 * @example
 *   <HourlyBars id="chart-received" title="Received" points={series} value={(p) => p.received} tone="ink" />
 */
export function HourlyBars(props: {
  id: string;
  title: string;
  points: HourPoint[];
  value: (point: HourPoint) => number | null;
  tone: string;
  note?: string;
}) {
  const values = props.points.map(props.value);
  const known = values.filter((value): value is number => value !== null);
  const total = known.reduce((sum, value) => sum + value, 0);
  const max = niceCeiling(Math.max(0, ...known));
  const axes = frame(props.points, max, String, true);
  const { left, step } = axes;
  const summary =
    known.length === 0
      ? "not available"
      : `${total} in the last ${props.points.length} hours, at most ${Math.max(0, ...known)} in one hour`;
  return (
    <figure class="chart" id={props.id} data-total={known.length === 0 ? "" : String(total)}>
      <figcaption>
        <strong>{props.title}</strong> <span class="muted">{known.length === 0 ? "—" : total}</span>
      </figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-label={`${props.title}: ${summary}`}
        preserveAspectRatio="xMidYMid meet"
      >
        <Axes points={props.points} max={max} frame={axes} />
        {props.points.map((point, index) => {
          const value = values[index];
          if (value === null || value === undefined || value === 0) return null;
          const height = Math.max(1, (value / max) * PLOT_H);
          return (
            <rect
              class={`bar ${props.tone}`}
              x={left + index * step + 1}
              y={TOP + PLOT_H - height}
              width={Math.max(1, step - 2)}
              height={height}
            >
              <title>{`${hourLabel(point.hour)} UTC: ${value}`}</title>
            </rect>
          );
        })}
      </svg>
      {props.note && <p class="muted chart-note">{props.note}</p>}
    </figure>
  );
}

/**
 * p50 and p95 lines per hour for a latency; hours without samples leave a gap.
 *
 * @example
 *   <HourlyLatency id="chart-pickup" title="Pickup" points={series} p50={(p) => p.pickupP50} p95={(p) => p.pickupP95} />
 */
export function HourlyLatency(props: {
  id: string;
  title: string;
  points: HourPoint[];
  p50: (point: HourPoint) => number | null;
  p95: (point: HourPoint) => number | null;
  note?: string;
}) {
  const p95 = props.points.map(props.p95);
  const p50 = props.points.map(props.p50);
  const known = [...p95, ...p50].filter((value): value is number => value !== null);
  const max = niceCeiling(Math.max(0, ...known));
  const axes = frame(props.points, max, formatDuration, false);
  const { left, step } = axes;
  const x = (index: number) => left + index * step + step / 2;
  const y = (value: number) => TOP + PLOT_H - (value / max) * PLOT_H;
  const path = (values: (number | null)[]) => {
    let d = "";
    let drawing = false;
    values.forEach((value, index) => {
      if (value === null) {
        drawing = false;
        return;
      }
      d += `${drawing ? "L" : "M"}${x(index).toFixed(1)},${y(value).toFixed(1)} `;
      drawing = true;
    });
    return d.trim();
  };
  const latest = [...p50].reverse().find((value) => value !== null) ?? null;
  return (
    <figure class="chart" id={props.id}>
      <figcaption>
        <strong>{props.title}</strong>{" "}
        <span class="muted">{known.length === 0 ? "no samples" : `latest p50 ${formatDuration(latest)}`}</span>
        <span class="legend">
          <span class="key p50" /> p50 <span class="key p95" /> p95
        </span>
      </figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-label={`${props.title}, p50 and p95 per hour`}
        preserveAspectRatio="xMidYMid meet"
      >
        <Axes points={props.points} max={max} frame={axes} />
        <path class="line p95" d={path(p95)} />
        <path class="line p50" d={path(p50)} />
        {/* Every point gets a mark, or an hour with no neighbour is a one-point path that draws nothing. The p95
            mark is a ring larger than the p50 dot: with one sample the two are equal and the dot would hide it. */}
        {props.points.map((point, index) => {
          const title = `${hourLabel(point.hour)} UTC: p50 ${formatDuration(p50[index])}, p95 ${formatDuration(p95[index])}`;
          return (
            <>
              {p95[index] !== null && (
                <circle class="dot p95" cx={x(index)} cy={y(p95[index]!)} r={4}>
                  <title>{title}</title>
                </circle>
              )}
              {p50[index] !== null && (
                <circle class="dot p50" cx={x(index)} cy={y(p50[index]!)} r={2.5}>
                  <title>{title}</title>
                </circle>
              )}
            </>
          );
        })}
      </svg>
      {props.note && <p class="muted chart-note">{props.note}</p>}
    </figure>
  );
}
