// Personalisation without HTTP: {{{KEY}}} and {{{KEY|fallback}}} filled from a lookup, escaped
// in html and raw in text, the unsubscribe placeholder left for the consumer.
import { describe, expect, it } from "vitest";
import { asText, contactLookup, escapeHtml, placeholderKeys, render, type ContactForPersonalisation } from "../../worker/templates/render.ts";
import { placeholderParts, readableText } from "../../worker/templates/variables.ts";

const ada = { email: "ada@example.com", firstName: "Ada <Countess>", lastName: null, properties: { company: "Analytical & Co", seats: 3 } };
const lookup = contactLookup(ada, new Map<string, string | number | null>([["plan", "free"], ["company", "your company"]]));

describe("render", () => {
  it("fills contact fields and properties, escaping values in html only", () => {
    const src = "<p>Hi {{{FIRST_NAME|there}}} of {{{company}}} ({{{seats}}} seats, {{{plan}}} plan) at {{{EMAIL}}}</p>";
    expect(render(src, lookup, "html")).toEqual({ output: "<p>Hi Ada &lt;Countess&gt; of Analytical &amp; Co (3 seats, free plan) at ada@example.com</p>", missing: [] });
    expect(render(src, lookup, "text").output).toBe("<p>Hi Ada <Countess> of Analytical & Co (3 seats, free plan) at ada@example.com</p>");
  });

  it("uses the placeholder's fallback for an absent or empty value, and reports keys with neither", () => {
    expect(render("Dear {{{LAST_NAME|friend}}}, {{{ LAST_NAME | reader }}}", lookup, "html")).toEqual({ output: "Dear friend, reader", missing: [] });
    expect(render("{{{LAST_NAME}}}/{{{unknown}}}/{{{unknown}}}", lookup, "text")).toEqual({ output: "//", missing: ["LAST_NAME", "unknown"] });
    expect(render("{{{FIRST_NAME|x}}}", () => "", "text").output).toBe("x");
  });

  it("leaves the unsubscribe placeholder for the consumer and anything that is not a placeholder alone", () => {
    const src = '<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a> {{ FIRST_NAME }} {{{}}} {{{9x}}}';
    expect(render(src, lookup, "html").output).toBe(src);
    expect(placeholderKeys(src + "{{{a}}}{{{b|c}}}{{{a}}}")).toEqual(["a", "b"]);
  });

  it("renders numbers, booleans, lists and objects as text", () => {
    const values: Record<string, unknown> = { n: 0, b: false, l: [1, "a"], o: { k: "<v>" } };
    const out = render("{{{n}}} {{{b}}} {{{l}}} {{{o}}}", (k) => values[k] as never, "html").output;
    expect(out).toBe(`0 false ${escapeHtml('[1,"a"]')} ${escapeHtml('{"k":"<v>"}')}`);
  });

  it("never finds a value every object inherits (constructor, toString, valueOf, __proto__)", () => {
    const builtins = "{{{constructor}}}{{{toString}}}{{{valueOf}}}{{{__proto__}}}{{{hasOwnProperty}}}";
    // No such property: each key is missing (html and text alike), never a function's source or "undefined".
    expect(render(`<p>${builtins}</p>`, lookup, "html")).toEqual({ output: "<p></p>", missing: ["constructor", "toString", "valueOf", "__proto__", "hasOwnProperty"] });
    expect(render(`{{{toString|friend}}} ${builtins}`, lookup, "text").output).toBe("friend ");
    // A contact.* spelling of them too.
    expect(render("{{{contact.constructor}}}", lookup, "html").output).toBe("");
    // Whatever a lookup hands back, the text of it is a string.
    expect(render("[{{{f}}}]", () => (() => 1) as never, "html").output).toBe("[]");
    expect([asText(undefined), asText(Symbol("s")), asText(() => 1), asText(null), asText(1n), asText(["x"])]).toEqual(["", "", "", "", "1", '["x"]']);
  });

  it("never makes a link or image address a script, whether a contact's value or a fallback brings it", () => {
    const values: Record<string, string> = { site: "javascript:alert(1)", spaced: " java\tscript:alert(1)", pic: "data:text/html;base64,PHNjcmlwdD4=", ok: "https://example.com/a?b=1&c=2" };
    const look = (k: string) => values[k];
    const src = '<a href="{{{site}}}">a</a><a href=\'{{{spaced}}}\'>b</a><img src="{{{pic}}}"><a href="{{{none|javascript:alert(2)}}}">c</a><a href="{{{ok}}}">d</a><a href="{{{none|VBScript:x}}}">e</a>';
    expect(render(src, look, "html").output).toBe('<a href="#">a</a><a href=\'#\'>b</a><img src="#"><a href="#">c</a><a href="https://example.com/a?b=1&amp;c=2">d</a><a href="#">e</a>');
    // The same words as text, or in html outside an address, are only words.
    expect(render("{{{site}}}", look, "text").output).toBe("javascript:alert(1)");
    expect(render("<p>{{{site}}}</p>", look, "html").output).toBe("<p>javascript:alert(1)</p>");
  });

  it("a value in an attribute written without quotes cannot end it and add another", () => {
    const values: Record<string, string> = { url: "https://a.example/ onmouseover=alert(1) style=position:fixed", tick: "x`y", spaced: " java\tscript:alert(1)" };
    const look = (k: string) => values[k];
    expect(render("<a href={{{url}}}>x</a>", look, "html").output).toBe("<a href=https://a.example/&#32;onmouseover&#61;alert(1)&#32;style&#61;position:fixed>x</a>");
    expect(render("<a href= https://b.example/?u={{{url}}} title=x{{{tick}}}>x</a>", look, "html").output)
      .toBe("<a href= https://b.example/?u=https://a.example/&#32;onmouseover&#61;alert(1)&#32;style&#61;position:fixed title=xx&#96;y>x</a>");
    // Still never a script, however the value is escaped.
    expect(render("<a href={{{spaced}}}>x</a>", look, "html").output).toBe("<a href=#>x</a>");
    // Quoted attributes and text keep the plain escaping (spaces stay spaces).
    expect(render('<a href="{{{url}}}">{{{url}}}</a>', look, "html").output).toBe('<a href="https://a.example/ onmouseover=alert(1) style=position:fixed">https://a.example/ onmouseover=alert(1) style=position:fixed</a>');
  });

  it("reads variables as the editor's chips name them, for pages that show a subject", () => {
    // The renderer's grammar: what it fills is exactly what reads as a variable.
    const src = "What's new, {{{ FIRST_NAME | friend }}} at {{{company}}}{{ x }}{{{9x}}}";
    expect(placeholderParts(src)).toEqual([{ text: "What's new, " }, { key: "FIRST_NAME", fallback: "friend" }, { text: " at " }, { key: "company", fallback: "" }, { text: "{{ x }}{{{9x}}}" }]);
    expect(readableText(src, new Map([["FIRST_NAME", "First name"]]))).toBe("What's new, First name (or “friend”) at company{{ x }}{{{9x}}}");
    expect(render(src, lookup, "text").output).toBe("What's new, Ada <Countess> at Analytical & Co{{ x }}{{{9x}}}");
  });
});

describe("a broadcast's text without one of its own", () => {
  // Derived once per broadcast (prepareBody) and rendered per recipient; it must read as the
  // recipient's rendered html converted to text did (the text part's definition).
  const bodies = [
    "<p>Hi {{{FIRST_NAME|there}}} of {{{company}}}</p><p>Read <a href=\"https://example.com/?u={{{EMAIL}}}\">the notes</a>.</p>",
    "<html><body><h1>News for {{{ FIRST_NAME | you }}}</h1><table><tr><td>{{{seats}}} seats</td><td>{{{plan}}}</td></tr></table><img src=\"x.png\" alt=\"x\"></body></html>",
    "<p>Leave any time: <a href=\"{{{RESEND_UNSUBSCRIBE_URL}}}\">unsubscribe</a>, {{{LAST_NAME|friend}}} &amp; co.</p><div style=\"display:none\">{{{EMAIL}}}</div>",
    "<p>{{{FIRST_NAME|A &amp; B}}}</p><ul><li>{{{company}}}</li><li><a href=\"https://x.test/\">https://x.test/</a></li></ul>",
    // Empty values mid-line, at a line's edges and in list items; values with runs of whitespace.
    "<p>Hi {{{LAST_NAME}}} there {{{seats}}}</p><p>{{{LAST_NAME}}} first</p><ol><li>{{{LAST_NAME}}} item {{{company}}}</li><li>{{{FIRST_NAME}}}</li></ol>",
    // Converted per recipient (a template cannot give these exactly): spaces html-to-text
    // keeps, and links whose href shows or hides by what a variable holds.
    "<p>Hi&nbsp;&nbsp;{{{FIRST_NAME}}}</p><pre>Name:    {{{FIRST_NAME}}}</pre>",
    "<p><a href=\"https://acme.test/\">{{{SITE|https://acme.test/}}}</a> and <a href=\"https://x.test/\">{{{LAST_NAME}}}</a> end</p>",
  ];
  const people: ContactForPersonalisation[] = [
    ada,
    { email: "bob@example.com", firstName: null, lastName: "O'Hara", properties: {} },
    { email: "c@example.com", firstName: "Chloé \"C\"", lastName: null, properties: { company: "<b>bold</b> & more", seats: 0 } },
    { email: "d@example.com", firstName: "  Dee\n  Dee ", lastName: "", properties: { company: "two  spaces\tand a tab", seats: "" } },
  ];
  it.each(bodies)("reads as the recipient's html converted: %s", async (html) => {
    const { htmlToText } = await import("../../worker/mime/html-to-text.ts");
    const { prepareBody, renderBroadcastBody } = await import("../../worker/broadcasts/content.ts");
    const b = { html, text: null, previewText: "Hello {{{FIRST_NAME|you}}}" };
    const prepared = prepareBody(b);
    for (const person of people) {
      const look = contactLookup(person, new Map<string, string | number | null>([["plan", "free"], ["company", "your company"]]));
      const body = renderBroadcastBody(b, look, prepared);
      // What the text was before: the rendered html (preview and footer included) as text, up
      // to spaces at the end of a line (an empty last value leaves none now).
      const lines = (t: string) => t.split("\n").map((l) => l.trimEnd()).join("\n");
      const expected = lines(htmlToText(body.html!));
      expect(lines(body.text!)).toBe(expected);
    }
    expect(prepared.footer).toBe(!html.includes("RESEND_UNSUBSCRIBE_URL"));
    expect(prepared.textTemplate === null).toBe(/&nbsp;|<a [^>]*\{\{\{|<a [^>]*>[^<]*\{\{\{/.test(html));
  });

  it("adds the unsubscribe footer by the body as written, whatever a contact's values hold", async () => {
    const { prepareBody, renderBroadcastBody } = await import("../../worker/broadcasts/content.ts");
    const sly = contactLookup({ email: "s@example.com", firstName: "{{{RESEND_UNSUBSCRIBE_URL}}}", lastName: null, properties: {} }, new Map());
    for (const b of [{ html: null, text: "Hello {{{FIRST_NAME}}}", previewText: null }, { html: "<p>Hello {{{FIRST_NAME}}}</p>", text: null, previewText: null }]) {
      const body = renderBroadcastBody(b, sly, prepareBody(b));
      expect(body.text).toMatch(/Unsubscribe or choose what you receive/);
      if (b.html) expect(body.html).toMatch(/Unsubscribe or choose what you receive/);
    }
    // A body that places the link itself gets no second one.
    const own = { html: null, text: "Leave: {{{ RESEND_UNSUBSCRIBE_URL }}}", previewText: null };
    expect(renderBroadcastBody(own, sly).text).toBe("Leave: {{{RESEND_UNSUBSCRIBE_URL}}}");
  });
});
