"""The published site's parts: reading what .asv holds (data), kperf's pages (pages),
and asv's pages made to work offline and to link to kperf's (asv_pages).
tools/site/publish.py puts them together. The static files beside this module (assets.json,
package.json, package-lock.json, kperf.css, kperf-asv.js) are copied or read at publish time.
"""
