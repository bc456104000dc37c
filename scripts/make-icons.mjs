// Renders the web app's PNG icons (icon-192.png, icon-512.png, for the PWA
// manifest) from crates/wo-server/src/web/icon.svg with Chromium, so the
// PNGs always match the SVG. Run after changing the SVG:
//   node scripts/make-icons.mjs   (needs `npm ci` in tests/browser)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(ROOT, 'tests/browser/package.json'));
const { chromium } = require('playwright-core');
const WEB = path.join(ROOT, 'crates/wo-server/src/web');
const svg = fs.readFileSync(path.join(WEB, 'icon.svg'), 'utf8');
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--headless', '--no-sandbox'] });
try {
  for (const size of [192, 512]) {
    const page = await browser.newPage({ viewport: { width: size, height: size } });
    await page.setContent(`<style>html,body{margin:0;background:transparent}svg{display:block;width:${size}px;height:${size}px}</style>${svg}`);
    await page.screenshot({ path: path.join(WEB, `icon-${size}.png`), omitBackground: true });
    await page.close();
  }
} finally {
  await browser.close();
}
