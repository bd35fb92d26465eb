// browser.mjs - Debian's Chromium, headless, for the page's tests
// (playwright-core): the flags every one of them runs it with, plus its
// own.
import process from 'node:process';
import { chromium } from 'playwright-core';

export function launch(extra = []) {
	return chromium.launch({
		executablePath: process.env.MK_CHROMIUM ?? '/usr/bin/chromium',
		args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic',
			'--no-first-run', '--disable-background-networking',
			'--disable-component-update', '--disable-sync', ...extra],
	});
}
