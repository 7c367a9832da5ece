/** The filter form's fields, shared by the receipts, dead-letter and bulk-replay pages. */

type Query = Record<string, string | undefined>;

/** Shared by the receipts and dead-letter filters: a labelled text input that keeps what was typed. */
export function TextFilter(props: { query: Query; name: string; label: string; placeholder?: string }) {
  return (
    <label>
      {props.label}
      <input name={props.name} value={props.query[props.name] ?? ""} placeholder={props.placeholder} />
    </label>
  );
}

/** A filter the server could not read: said next to the form, which keeps everything that was typed. */
export function FilterProblem(props: { problem: string | undefined }) {
  return props.problem ? (
    <p class="error" id="filter-problem" role="alert">
      {props.problem}
    </p>
  ) : null;
}
