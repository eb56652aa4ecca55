// libqp (mailparser's quoted-printable decoder) ships no types; the tests use its decode as the
// reference for the bridge's own (test/node/simple-message.test.ts).
declare module "libqp" {
  const libqp: { decode(input: Buffer | string): Buffer };
  export default libqp;
}
