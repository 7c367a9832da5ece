import type { HourPoint } from "../stats/series";

const WIDTH = 96;
const HEIGHT = 22;
/** The baseline's y: the bars stand on it, and an hour with nothing received shows only it. */
const BASE = HEIGHT - 1;

/**
 * Received per hour for the sources table, as one small bar per hour on a grey baseline: a line through 23 empty
 * hours and one busy one read as a coloured underline, not as a chart. An hour with a dead receipt is drawn red.
 *
 * @example
 *   <Sparkline points={series.get("stripe")!} label="stripe: received per hour, last 24 hours" />
 */
export function Sparkline(props: { points: HourPoint[]; label: string }) {
  const max = Math.max(1, ...props.points.map((point) => point.received));
  const step = WIDTH / Math.max(1, props.points.length);
  return (
    <svg
      class="spark"
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      width={WIDTH}
      height={HEIGHT}
      role="img"
      aria-label={props.label}
    >
      <line class="baseline" x1={0} x2={WIDTH} y1={BASE + 0.5} y2={BASE + 0.5} />
      {props.points.map((point, index) => {
        if (point.received === 0) return null;
        // At least 2 units, so that one receipt in a busy day still shows.
        const height = Math.max(2, (point.received / max) * (BASE - 1));
        return (
          <rect
            class={`spark-bar${point.dead > 0 ? " has-dead" : ""}`}
            x={(index * step + 0.5).toFixed(1)}
            y={(BASE - height).toFixed(1)}
            width={Math.max(1, step - 1).toFixed(1)}
            height={height.toFixed(1)}
          />
        );
      })}
    </svg>
  );
}
