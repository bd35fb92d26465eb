/*
 * oaurl.c - the URLs of OAuth discovery (see oauth.h): origins, the
 * well-known metadata URLs, resource identifiers, and where a URL taken
 * from metadata may point (address classes).  Pure: curl's URL API and
 * inet_pton only.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcpkeep.h"
#include "transport/oauth.h"

/* Splits url into origin and path (without a trailing '/'). */
static int
split(const char *url, char *origin, size_t olen, char *path, size_t plen)
{
	CURLU *u = curl_url();
	char  *p = NULL;
	int    rv;

	if (u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &p, 0) != CURLUE_OK) {
		curl_url_cleanup(u);
		return (MK_EINVAL);
	}
	curl_url_cleanup(u);
	if ((rv = oa_origin(url, origin, olen)) == 0) {
		size_t n = strlen(p);
		while (n > 0 && p[n - 1] == '/') {
			n--;
		}
		snprintf(path, plen, "%.*s", (int)n, p);
	}
	curl_free(p);
	return (rv);
}

int
oa_origin(const char *url, char *out, size_t len)
{
	CURLU *u      = curl_url();
	char  *scheme = NULL, *host = NULL, *port = NULL;
	int    rv = MK_EINVAL;

	if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0)) {
		curl_url_get(u, CURLUPART_PORT, &port, 0);
		snprintf(out, len, "%s://%s%s%s", scheme, host,
		         port != NULL ? ":" : "", port != NULL ? port : "");
		rv = 0;
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return (rv);
}

bool
oa_same_origin(const char *a, const char *b)
{
	const char *urls[2] = {a, b};
	char       *p[2][3] = {{NULL}};
	bool        same    = true;

	for (int i = 0; i < 2; i++) {
		CURLU *u = curl_url();
		if (u == NULL ||
		    curl_url_set(u, CURLUPART_URL, urls[i], 0) != CURLUE_OK ||
		    curl_url_get(u, CURLUPART_SCHEME, &p[i][0], 0) !=
		            CURLUE_OK ||
		    curl_url_get(u, CURLUPART_HOST, &p[i][1], 0) !=
		            CURLUE_OK ||
		    curl_url_get(u, CURLUPART_PORT, &p[i][2],
		                 CURLU_DEFAULT_PORT) != CURLUE_OK ||
		    (strcmp(p[i][0], "http") != 0 &&
		     strcmp(p[i][0], "https") != 0)) {
			same = false;
		}
		curl_url_cleanup(u);
	}
	same = same && strcmp(p[0][0], p[1][0]) == 0 &&
	        strcasecmp(p[0][1], p[1][1]) == 0 &&
	        strcmp(p[0][2], p[1][2]) == 0;
	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < 3; k++) {
			curl_free(p[i][k]);
		}
	}
	return (same);
}

bool
oa_resource_covers(const char *resource, const char *url)
{
	char   ro[OA_URL_MAX], rp[OA_URL_MAX], uo[OA_URL_MAX], up[OA_URL_MAX];
	char  *frag = NULL;
	CURLU *u    = curl_url();
	size_t n;

	if (u == NULL ||
	    curl_url_set(u, CURLUPART_URL, resource, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
		curl_free(frag);
		curl_url_cleanup(u);
		return (false); /* a resource identifier has no fragment */
	}
	curl_url_cleanup(u);
	if (!oa_same_origin(resource, url) ||
	    split(resource, ro, sizeof(ro), rp, sizeof(rp)) != 0 ||
	    split(url, uo, sizeof(uo), up, sizeof(up)) != 0) {
		return (false);
	}
	n = strlen(rp);
	return (strncmp(rp, up, n) == 0 && (up[n] == '\0' || up[n] == '/'));
}

bool
oa_names_origin(const char *url, const char *origin)
{
	CURLU *u = curl_url();
	char  *p = NULL, *q = NULL, *f = NULL, *who = NULL;
	bool   bare;

	if (u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &p, 0) != CURLUE_OK) {
		curl_url_cleanup(u);
		return (false);
	}
	bare = (p[0] == '\0' || strcmp(p, "/") == 0) &&
	        curl_url_get(u, CURLUPART_QUERY, &q, 0) != CURLUE_OK &&
	        curl_url_get(u, CURLUPART_FRAGMENT, &f, 0) != CURLUE_OK &&
	        curl_url_get(u, CURLUPART_USER, &who, 0) != CURLUE_OK;
	curl_free(p);
	curl_free(q);
	curl_free(f);
	curl_free(who);
	curl_url_cleanup(u);
	return (bare && oa_same_origin(url, origin));
}

static oa_net
net4(uint32_t a)
{
	if ((a >> 24) == 127 || (a >> 24) == 0) {
		return (OA_NET_LOOPBACK); /* 0/8 reaches this host too */
	}
	if ((a >> 24) == 10 || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 ||
	    (a & 0xffc00000u) == 0x64400000u) {
		return (OA_NET_PRIVATE);
	}
	if ((a >> 16) == 0xa9fe) {
		return (OA_NET_LINKLOCAL);
	}
	return (OA_NET_PUBLIC);
}

static oa_net
net6(const uint8_t b[16])
{
	static const uint8_t zero[12]   = {0};
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
	                                   0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64[12]  = {0, 0x64, 0xff, 0x9b};

	if (memcmp(b, zero, 12) == 0 || memcmp(b, mapped, 12) == 0 ||
	    memcmp(b, nat64, 12) == 0) {
		uint32_t a = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
		        (uint32_t)b[14] << 8 | b[15];
		/* ::, ::1 and ::a.b.c.d (deprecated) alike */
		return (memcmp(b, zero, 12) == 0 && a <= 1 ? OA_NET_LOOPBACK
		                                           : net4(a));
	}
	if ((b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)) {
		return (OA_NET_PRIVATE); /* unique local; old site-local */
	}
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) {
		return (OA_NET_LINKLOCAL);
	}
	return (OA_NET_PUBLIC);
}

oa_net
oa_net_of(const char *host)
{
	char            buf[256];
	size_t          n = host != NULL ? strlen(host) : 0;
	struct in_addr  a4;
	struct in6_addr a6;

	if (n >= sizeof(buf)) {
		return (OA_NET_PUBLIC); /* no address is that long */
	}
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		snprintf(buf, sizeof(buf), "%.*s", (int)n - 2, host + 1);
	} else {
		snprintf(buf, sizeof(buf), "%s", n > 0 ? host : "");
	}
	buf[strcspn(buf, "%")] = '\0'; /* an IPv6 zone */
	if (inet_pton(AF_INET, buf, &a4) == 1) {
		return (net4(ntohl(a4.s_addr)));
	}
	if (inet_pton(AF_INET6, buf, &a6) == 1) {
		return (net6(a6.s6_addr));
	}
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '.') {
		buf[--n] = '\0'; /* the root's dot */
	}
	/* RFC 6761: localhost and every name under it */
	if (strcasecmp(buf, "localhost") == 0 ||
	    (n > 10 && strcasecmp(buf + n - 10, ".localhost") == 0)) {
		return (OA_NET_LOOPBACK);
	}
	return (OA_NET_PUBLIC);
}

oa_net
oa_url_net(const char *url)
{
	CURLU *u    = curl_url();
	char  *host = NULL;
	oa_net n    = OA_NET_PUBLIC;

	if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
		n = oa_net_of(host);
	}
	curl_free(host);
	curl_url_cleanup(u);
	return (n);
}

oa_verdict
oa_url_check(const char *url, const oa_rules *r, char *scheme, size_t slen)
{
	CURLU     *u   = curl_url();
	char      *sch = NULL, *host = NULL, *user = NULL, *pass = NULL;
	oa_verdict v = OA_URL_SCHEME;

	if (scheme != NULL && slen > 0) {
		scheme[0] = '\0';
	}
	if (u != NULL && url != NULL &&
	    curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) ==
	            CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &sch, 0) == CURLUE_OK) {
		if (scheme != NULL && slen > 0) {
			snprintf(scheme, slen, "%s", sch);
		}
		bool http = strcmp(sch, "http") == 0;
		if (!http && strcmp(sch, "https") != 0) {
			v = OA_URL_SCHEME;
		} else if (curl_url_get(u, CURLUPART_HOST, &host, 0) !=
		           CURLUE_OK) {
			v = OA_URL_SCHEME;
		} else if (curl_url_get(u, CURLUPART_USER, &user, 0) ==
		                   CURLUE_OK ||
		           curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) ==
		                   CURLUE_OK) {
			v = OA_URL_USERINFO;
		} else {
			oa_net n = oa_net_of(host);
			v        = http && !r->http && n != OA_NET_LOOPBACK
			               ? OA_URL_HTTP
			               : n != OA_NET_PUBLIC &&
                                        (r->nets & OA_NET_BIT(n)) == 0
			               ? OA_URL_ADDRESS
			               : OA_URL_OK;
		}
	}
	curl_free(sch);
	curl_free(host);
	curl_free(user);
	curl_free(pass);
	curl_url_cleanup(u);
	return (v);
}

const char *
oa_net_name(oa_net n)
{
	switch (n) {
	case OA_NET_LOOPBACK:
		return ("loopback");
	case OA_NET_PRIVATE:
		return ("private");
	case OA_NET_LINKLOCAL:
		return ("link-local");
	default:
		return ("public");
	}
}

int
oa_prm_urls(const char *resource, char urls[][OA_URL_MAX], int n)
{
	char origin[OA_URL_MAX / 4], path[OA_URL_MAX / 4];
	int  k = 0;

	if (split(resource, origin, sizeof(origin), path, sizeof(path)) != 0) {
		return (0);
	}
	if (path[0] != '\0' && k < n) {
		snprintf(urls[k++], OA_URL_MAX,
		         "%s/.well-known/oauth-protected-resource%s", origin,
		         path);
	}
	if (k < n) {
		snprintf(urls[k++], OA_URL_MAX,
		         "%s/.well-known/oauth-protected-resource", origin);
	}
	return (k);
}

int
oa_as_meta_urls(const char *issuer, char urls[][OA_URL_MAX], int n)
{
	char origin[OA_URL_MAX / 4], path[OA_URL_MAX / 4];
	int  k = 0;

	if (split(issuer, origin, sizeof(origin), path, sizeof(path)) != 0) {
		return (0);
	}
	if (k < n) {
		snprintf(urls[k++], OA_URL_MAX,
		         "%s/.well-known/oauth-authorization-server%s", origin,
		         path);
	}
	if (k < n) {
		snprintf(urls[k++], OA_URL_MAX,
		         "%s/.well-known/openid-configuration%s", origin,
		         path);
	}
	if (path[0] != '\0' && k < n) {
		snprintf(urls[k++], OA_URL_MAX,
		         "%s%s/.well-known/openid-configuration", origin,
		         path);
	}
	return (k);
}
