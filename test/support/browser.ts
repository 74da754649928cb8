// A browser for the server-rendered pages, over real HTTP: follows no redirect by itself, keeps
// the session cookie, sends our own Origin with its form posts (as a browser does on a same-site form).

export interface Page {
  readonly status: number;
  /** The Location header, or ''. */
  readonly location: string;
  readonly text: string;
  readonly headers: Headers;
}

export function browser(base: string, headers: Record<string, string> = {}) {
  let cookie = '';
  const send = async (method: 'GET' | 'POST', path: string, form?: Record<string, string>): Promise<Page> => {
    const res = await fetch(path.startsWith('http') ? path : `${base}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        ...(cookie === '' ? {} : { cookie }),
        ...(form === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded', origin: base }),
        ...headers,
      },
      ...(form === undefined ? {} : { body: new URLSearchParams(form).toString() }),
    });
    const set = res.headers.get('set-cookie');
    if (set !== null) cookie = set.split(';')[0]!;
    return {
      status: res.status,
      location: res.headers.get('location') ?? '',
      text: await res.text(),
      headers: res.headers,
    };
  };
  return { send, cookie: () => cookie };
}

/** The hidden inputs of a page's form, unescaped. */
export function hiddenFields(html: string): Record<string, string> {
  return Object.fromEntries(
    [...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [
      m[1]!,
      m[2]!.replace(/&#(\d+);/g, (_x, n: string) => String.fromCharCode(Number(n))),
    ]),
  );
}
