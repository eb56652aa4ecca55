// The pages a person sees before they are signed in: sign in, sign up, the second factor,
// forgotten and new password. Their forms post to better-auth's endpoints under
// /dashboard/api/auth (app.js sends them as JSON).
import { AuthLayout } from "./layout.tsx";
import { MAX_PERSON_NAME, type Providers } from "./auth.ts";
import { MIN_PASSWORD_LENGTH } from "./passwords.ts";

function OAuthButtons(props: { providers: Providers }) {
  const { google, github } = props.providers;
  if (!google && !github) return null;
  return (
    <div class="providers">
      {google ? (
        <form method="post" data-api="/dashboard/api/auth/sign-in/social">
          <input type="hidden" name="provider" value="google" />
          <input type="hidden" name="callbackURL" value="/dashboard/emails" />
          <input type="hidden" name="errorCallbackURL" value="/dashboard/sign-in?error=oauth" />
          <button type="submit" class="secondary" style="width:100%">Continue with Google</button>
        </form>
      ) : null}
      {github ? (
        <form method="post" data-api="/dashboard/api/auth/sign-in/social">
          <input type="hidden" name="provider" value="github" />
          <input type="hidden" name="callbackURL" value="/dashboard/emails" />
          <input type="hidden" name="errorCallbackURL" value="/dashboard/sign-in?error=oauth" />
          <button type="submit" class="secondary" style="width:100%">Continue with GitHub</button>
        </form>
      ) : null}
    </div>
  );
}

const NOTICES: Record<string, string> = {
  verified: "Your address is confirmed. Sign in to continue.",
  "check-email": "We sent you a link to confirm your address. Open it, then sign in.",
  reset: "Your password was changed. Sign in with the new one.",
  "signed-out": "You are signed out.",
  "account-deleted": "The account and all its data are deleted, and you are signed out.",
  oauth: "The sign-in with that provider did not complete. Try again, or use your email and password.",
};

/** "Sign in with a passkey", where the dashboard's address can have passkeys (not an IP). */
function PasskeySignIn(props: { usable: boolean }) {
  if (!props.usable) return null;
  return (
    <div class="providers" data-passkey-box>
      <button type="button" class="secondary" style="width:100%" data-passkey="sign-in">Sign in with a passkey</button>
      <script src="/dashboard/assets/vendor/simplewebauthn-browser.min.js" defer></script>
      <script type="module" src="/dashboard/assets/passkeys.js"></script>
    </div>
  );
}

export function SignInPage(props: { providers: Providers; notice?: string | undefined; passkeys: boolean }) {
  const notice = props.notice ? NOTICES[props.notice] : undefined;
  return (
    <AuthLayout title="Sign in to tern">
      {notice ? <p class="notice" role="status">{notice}</p> : null}
      <form method="post" data-api="/dashboard/api/auth/sign-in/email" data-then="/dashboard/emails">
        <label>Email<input type="email" name="email" autocomplete="username" required /></label>
        <label>Password<input type="password" name="password" autocomplete="current-password" required /></label>
        <input type="hidden" name="callbackURL" value="/dashboard/sign-in?notice=verified" />
        <button type="submit">Sign in</button>
      </form>
      <PasskeySignIn usable={props.passkeys} />
      <OAuthButtons providers={props.providers} />
      <p class="alt"><a href="/dashboard/forgot-password">Forgot your password?</a> · <a href="/dashboard/sign-up">Create an account</a></p>
    </AuthLayout>
  );
}

export function SignUpPage(props: { providers: Providers }) {
  return (
    <AuthLayout title="Create your tern account">
      <form method="post" data-api="/dashboard/api/auth/sign-up/email" data-then="/dashboard/sign-in?notice=check-email">
        <label>Name<input name="name" autocomplete="name" maxlength={MAX_PERSON_NAME} required /></label>
        <label>Email<input type="email" name="email" autocomplete="email" required /></label>
        <label>
          Password (at least {MIN_PASSWORD_LENGTH} characters, not a common one)
          <input type="password" name="password" autocomplete="new-password" minlength={MIN_PASSWORD_LENGTH} required />
        </label>
        <input type="hidden" name="callbackURL" value="/dashboard/sign-in?notice=verified" />
        <button type="submit">Create account</button>
      </form>
      <OAuthButtons providers={props.providers} />
      <p class="alt">Already have an account? <a href="/dashboard/sign-in">Sign in</a></p>
    </AuthLayout>
  );
}

export function TwoFactorPage() {
  return (
    <AuthLayout title="Two-factor authentication">
      <form method="post" data-api="/dashboard/api/auth/two-factor/verify-totp" data-then="/dashboard/emails">
        <label>
          The 6-digit code from your authenticator app
          <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required autofocus />
        </label>
        <button type="submit">Verify</button>
      </form>
      <details>
        <summary>Use a recovery code instead</summary>
        <form method="post" data-api="/dashboard/api/auth/two-factor/verify-backup-code" data-then="/dashboard/emails">
          <label>Recovery code<input name="code" autocomplete="off" required /></label>
          <button type="submit" class="secondary">Use recovery code</button>
        </form>
      </details>
      <p class="alt"><a href="/dashboard/sign-in">Start over</a></p>
    </AuthLayout>
  );
}

export function ForgotPasswordPage() {
  return (
    <AuthLayout title="Reset your password">
      <form method="post" data-api="/dashboard/api/auth/request-password-reset" data-show="reset-sent" data-hide>
        <label>Email<input type="email" name="email" autocomplete="email" required /></label>
        <input type="hidden" name="redirectTo" value="/dashboard/reset-password" />
        <button type="submit">Email me a link</button>
      </form>
      <p id="reset-sent" hidden role="status">If an account uses that address, a link to reset its password is on its way.</p>
      <p class="alt"><a href="/dashboard/sign-in">Back to sign in</a></p>
    </AuthLayout>
  );
}

export function ResetPasswordPage(props: { token: string | undefined; error?: string | undefined }) {
  return (
    <AuthLayout title="Choose a new password">
      {!props.token || props.error ? (
        <p class="error" role="alert">This link is invalid or has expired. <a href="/dashboard/forgot-password">Ask for a new one</a>.</p>
      ) : (
        <form method="post" data-api="/dashboard/api/auth/reset-password" data-then="/dashboard/sign-in?notice=reset">
          <input type="hidden" name="token" value={props.token} />
          <label>
            New password (at least {MIN_PASSWORD_LENGTH} characters)
            <input type="password" name="newPassword" autocomplete="new-password" minlength={MIN_PASSWORD_LENGTH} required />
          </label>
          <button type="submit">Set password</button>
        </form>
      )}
    </AuthLayout>
  );
}

/** memberAs: the signed-in person's role when they already belong to the account. */
export function InvitationPage(props: { accountName: string | null; token: string; signedIn: boolean; memberAs?: string | undefined; csrf?: string | undefined }) {
  return (
    <AuthLayout title="Join an account" csrf={props.csrf}>
      {!props.accountName ? (
        <p class="error" role="alert">This invitation is invalid, used or expired. Ask the account's owner for a new one.</p>
      ) : props.signedIn && props.memberAs ? (
        <form method="post" data-api="/dashboard/api/invitations/accept" data-then="/dashboard/emails">
          <p>You are already a member of <strong>{props.accountName}</strong> ({props.memberAs}). Opening it uses up this invitation; your role stays {props.memberAs}.</p>
          <input type="hidden" name="token" value={props.token} />
          <button type="submit">Open {props.accountName}</button>
        </form>
      ) : props.signedIn ? (
        <form method="post" data-api="/dashboard/api/invitations/accept" data-then="/dashboard/emails">
          <p>You are invited to join <strong>{props.accountName}</strong>.</p>
          <input type="hidden" name="token" value={props.token} />
          <button type="submit">Join {props.accountName}</button>
        </form>
      ) : (
        <p>
          You are invited to join <strong>{props.accountName}</strong>. <a href={`/dashboard/sign-up`}>Create an account</a> or{" "}
          <a href={`/dashboard/sign-in`}>sign in</a> with the invited address, then open this link again.
        </p>
      )}
    </AuthLayout>
  );
}
