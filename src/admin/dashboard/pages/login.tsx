import { Page } from "../layout";

export function LoginPage(props: { problem?: string }) {
  return (
    <Page title="Sign in" signedIn={false}>
      <form class="login" method="post" action="/admin/login">
        <h1>Sign in</h1>
        {props.problem && <p class="error">{props.problem}</p>}
        <label for="token">Admin token</label>
        <input id="token" name="token" type="password" autocomplete="current-password" required />
        <button type="submit">Sign in</button>
        <p class="muted">The ADMIN_TOKEN Worker secret. It is exchanged for a session cookie and never put in a URL.</p>
      </form>
    </Page>
  );
}

export function ProblemPage(props: { status: number; message: string }) {
  const failed = props.status >= 500;
  return (
    <Page title="Problem">
      <h1>{props.status === 404 ? "Not found" : failed ? "Could not load this page" : "Request not understood"}</h1>
      <p class="error">{props.message}</p>
      {failed && (
        <p>
          <a href="/admin/system">The System page</a> says whether D1 or another part of the receiver is down; it does
          not need D1 to answer.
        </p>
      )}
    </Page>
  );
}
