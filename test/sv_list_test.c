/*
 * sv_list_test.c - the supervisor's list view (actors/supervisor/list.c):
 * the filter read, the entries matched, sorted by name and paged.  Pure
 * functions: no actor, no kernel, entries made here.
 */
#include "actors/supervisor/sv_impl.h"
#include "testutil.h"

#define NMAX 40

/* The entries a test lists, in no order. */
static entry *all[NMAX];
static size_t nall;

/* Adds an entry whose view is {"name": name, "state": shown's} (none
 * when noview). */
static void
add(const char *id, const char *name, cl_state shown, const char *conn,
    const char *auth, bool noview)
{
	entry *e = calloc(1, sizeof(*e));
	char   view[128];

	CHECK(e != NULL && nall < NMAX);
	e->id   = strdup(id);
	e->name = strdup(name);
	snprintf(view, sizeof(view), "{\"name\":\"%s\",\"state\":\"%s\"}",
	         name, cl_state_name(shown));
	e->view = noview ? NULL : strdup(view);
	/* the list filters on what the view shows, not on the state */
	e->state = CS_HEALTHY;
	e->shown = shown;
	snprintf(e->conn, sizeof(e->conn), "%s", conn);
	snprintf(e->auth, sizeof(e->auth), "%s", auth);
	all[nall++] = e;
}

static void
clear(void)
{
	while (nall != 0) {
		entry *e = all[--nall];
		free(e->id);
		free(e->name);
		free(e->view);
		free(e->metrics);
		free(e);
	}
}

/* The page for filter text f as "name,name,...", with its counts. */
static char *
page(const char *f, json_int_t *count, json_int_t *total)
{
	char         err[96], *out = calloc(1, 64 * NMAX);
	sv_list_spec spec;
	json_t      *res, *c;
	size_t       i;

	CHECK(out != NULL);
	CHECK_EQ(sv_list_spec_parse(f, &spec, err, sizeof(err)), 0);
	res = sv_list_page(all, nall, &spec);
	CHECK(res != NULL);
	CHECK(json_is_array(json_object_get(res, "clients")));
	json_array_foreach(json_object_get(res, "clients"), i, c)
	{
		if (i != 0) {
			strcat(out, ",");
		}
		strcat(out, json_string_value(json_object_get(c, "name")));
	}
	*count = json_integer_value(json_object_get(res, "count"));
	*total = json_integer_value(json_object_get(res, "total_count"));
	CHECK_EQ(*count, json_array_size(json_object_get(res, "clients")));
	json_decref(res);
	json_decref(spec.filter);
	return (out);
}

/* Checks the page of filter f: its names, count and total_count. */
static void
expect(int line, const char *f, const char *names, json_int_t count,
       json_int_t total)
{
	json_int_t c, t;
	char      *got = page(f, &c, &t);

	if (strcmp(got, names) != 0 || c != count || t != total) {
		fprintf(stderr,
		        "%s:%d: %s: \"%s\" count %lld total %lld, not \"%s\" %lld %lld\n",
		        __FILE__, line, f != NULL ? f : "(none)", got,
		        (long long)c, (long long)t, names, (long long)count,
		        (long long)total);
		exit(1);
	}
	free(got);
}
#define PAGE(f, names, count, total) expect(__LINE__, f, names, count, total)

/* Checks that filter f is refused with the reason why. */
static void
refused(const char *f, const char *why)
{
	char         err[96] = "";
	sv_list_spec spec    = {.filter = NULL, .limit = -7, .offset = -7};

	CHECK_EQ(sv_list_spec_parse(f, &spec, err, sizeof(err)), MK_EINVAL);
	if (strcmp(err, why) != 0) {
		fprintf(stderr, "%s: \"%s\" != \"%s\"\n", f, err, why);
		exit(1);
	}
	/* untouched */
	CHECK(spec.filter == NULL);
	CHECK_EQ(spec.limit, -7);
	CHECK_EQ(spec.offset, -7);
}

static void
some(void)
{
	add("id-c", "charlie", CS_HEALTHY, "http", "none", false);
	add("id-a", "alpha", CS_UNSTABLE, "stdio", "headers", false);
	add("X-Echo", "echo", CS_REAUTH, "sse", "oauth", false);
	add("id-b", "bravo", CS_HEALTHY, "http", "oauth", false);
	add("id-d", "delta", CS_DISABLED, "http", "per_user_oauth", false);
}

static void
empty(void)
{
	PAGE(NULL, "", 0, 0);
	PAGE("", "", 0, 0);
	PAGE("{}", "", 0, 0);
	PAGE("{\"state\":\"healthy\",\"offset\":10}", "", 0, 0);
}

static void
sorted_by_name(void)
{
	entry *before[NMAX];

	some();
	memcpy(before, all, sizeof(before));
	PAGE(NULL, "alpha,bravo,charlie,delta,echo", 5, 5);
	PAGE("{}", "alpha,bravo,charlie,delta,echo", 5, 5);
	/* the caller's array is not reordered */
	CHECK(memcmp(before, all, sizeof(before)) == 0);
	clear();
	/* strcmp order: upper case before lower */
	add("1", "b", CS_HEALTHY, "http", "none", false);
	add("2", "B", CS_HEALTHY, "http", "none", false);
	add("3", "a", CS_HEALTHY, "http", "none", false);
	add("4", "A2", CS_HEALTHY, "http", "none", false);
	PAGE(NULL, "A2,B,a,b", 4, 4);
	clear();
}

static void
filters(void)
{
	some();
	PAGE("{\"state\":\"healthy\"}", "bravo,charlie", 2, 2);
	/* the state the view shows, not the runtime's */
	PAGE("{\"state\":\"needs_reauth\"}", "echo", 1, 1);
	PAGE("{\"state\":\"Healthy\"}", "", 0, 0); /* exact */
	PAGE("{\"connection_type\":\"http\"}", "bravo,charlie,delta", 3, 3);
	PAGE("{\"connection_type\":\"stdio\"}", "alpha", 1, 1);
	PAGE("{\"auth_type\":\"oauth\"}", "bravo,echo", 2, 2);
	PAGE("{\"auth_type\":\"per_user_oauth\"}", "delta", 1, 1);
	/* search: in the name or the id, any case */
	PAGE("{\"search\":\"ALP\"}", "alpha", 1, 1);
	PAGE("{\"search\":\"x-ech\"}", "echo", 1, 1);
	PAGE("{\"search\":\"id-\"}", "alpha,bravo,charlie,delta", 4, 4);
	PAGE("{\"search\":\"\"}", "alpha,bravo,charlie,delta,echo", 5, 5);
	PAGE("{\"search\":\"zulu\"}", "", 0, 0);
	/* every given filter must match */
	PAGE("{\"state\":\"healthy\",\"auth_type\":\"oauth\"}", "bravo", 1, 1);
	PAGE("{\"connection_type\":\"http\",\"search\":\"a\"}",
	     "bravo,charlie,delta", 3, 3);
	PAGE("{\"connection_type\":\"sse\",\"state\":\"healthy\"}", "", 0, 0);
	/* a filter that is not a string, or unknown, filters nothing */
	PAGE("{\"state\":3,\"auth_type\":null,\"colour\":\"red\"}",
	     "alpha,bravo,charlie,delta,echo", 5, 5);
	clear();
}

static void
paging(void)
{
	char id[16], name[16];

	for (int i = 0; i < 30; i++) {
		int k = 29 - i; /* added last first */

		snprintf(id, sizeof(id), "id%02d", k);
		snprintf(name, sizeof(name), "n%02d", k);
		add(id, name, k % 2 ? CS_UNSTABLE : CS_HEALTHY, "http", "none",
		    false);
	}
	/* default: 25 from the first */
	{
		json_int_t c, t;
		char      *got = page(NULL, &c, &t);
		CHECK_EQ(c, 25);
		CHECK_EQ(t, 30);
		CHECK(strncmp(got, "n00,n01,", 8) == 0);
		CHECK(strcmp(got + strlen(got) - 4, ",n24") == 0);
		free(got);
	}
	PAGE("{\"limit\":3}", "n00,n01,n02", 3, 30);
	PAGE("{\"limit\":3,\"offset\":3}", "n03,n04,n05", 3, 30);
	PAGE("{\"limit\":4,\"offset\":28}", "n28,n29", 2, 30); /* the last */
	PAGE("{\"limit\":1,\"offset\":29}", "n29", 1, 30);
	/* past the end: an empty page, the total still counted */
	PAGE("{\"offset\":30}", "", 0, 30);
	PAGE("{\"limit\":100,\"offset\":1000}", "", 0, 30);
	/* the page is of the matches, total_count counts them all */
	PAGE("{\"state\":\"unstable\",\"limit\":2,\"offset\":1}", "n03,n05", 2,
	     15);
	PAGE("{\"state\":\"healthy\",\"limit\":100}",
	     "n00,n02,n04,n06,n08,n10,n12,n14,n16,n18,n20,n22,n24,n26,n28", 15,
	     15);
	/* limit and offset that are not integers: the defaults */
	PAGE("{\"limit\":\"3\",\"offset\":2.5}",
	     "n00,n01,n02,n03,n04,n05,n06,n07,n08,n09,n10,n11,n12,n13,n14,n15,n16,n17,n18,n19,n20,n21,n22,n23,n24",
	     25, 30);
	clear();
}

static void
without_view(void)
{
	/* counted, and in the page's window, but no view to show */
	add("1", "a", CS_HEALTHY, "http", "none", false);
	add("2", "b", CS_HEALTHY, "http", "none", true);
	add("3", "c", CS_HEALTHY, "http", "none", false);
	PAGE(NULL, "a,c", 2, 3);
	PAGE("{\"limit\":2}", "a", 1, 3);
	PAGE("{\"limit\":1,\"offset\":1}", "", 0, 3);
	clear();
}

/* "metrics": true puts each client's kept counters in its view ({}
 * before the first push); without it the view is as pushed. */
static void
with_metrics(void)
{
	char         err[96];
	sv_list_spec spec;
	json_t      *res, *cs;

	add("1", "a", CS_HEALTHY, "http", "none", false);
	add("2", "b", CS_HEALTHY, "http", "none", false);
	all[0]->metrics = strdup("{\"checks\":3}");
	CHECK_EQ(sv_list_spec_parse("{\"metrics\":true}", &spec, err,
	                            sizeof(err)),
	         0);
	CHECK(spec.metrics);
	CHECK((res = sv_list_page(all, nall, &spec)) != NULL);
	cs = json_object_get(res, "clients");
	CHECK_EQ(json_integer_value(json_object_get(
	                 json_object_get(json_array_get(cs, 0), "metrics"),
	                 "checks")),
	         3);
	CHECK(json_is_object(
	        json_object_get(json_array_get(cs, 1), "metrics")));
	CHECK_EQ(json_object_size(
	                 json_object_get(json_array_get(cs, 1), "metrics")),
	         0);
	json_decref(res);
	json_decref(spec.filter);
	CHECK_EQ(sv_list_spec_parse("{\"metrics\":false}", &spec, err,
	                            sizeof(err)),
	         0);
	CHECK(!spec.metrics);
	CHECK((res = sv_list_page(all, nall, &spec)) != NULL);
	cs = json_object_get(res, "clients");
	CHECK(json_object_get(json_array_get(cs, 0), "metrics") == NULL);
	json_decref(res);
	json_decref(spec.filter);
	clear();
}

static void
bad_filter(void)
{
	const char *obj = "the filter must be a JSON object";
	const char *lim = "limit must be 1..100 and offset >= 0";

	refused("{", obj);
	refused("not json", obj);
	refused("[]", obj);
	refused("null", obj);
	refused("\"state\"", obj);
	refused("{\"limit\":0}", lim);
	refused("{\"limit\":-1}", lim);
	refused("{\"limit\":101}", lim);
	refused("{\"offset\":-1}", lim);
	refused("{\"limit\":10,\"offset\":-5}", lim);
	/* the bounds themselves are fine */
	PAGE("{\"limit\":1}", "", 0, 0);
	PAGE("{\"limit\":100,\"offset\":0}", "", 0, 0);
	{
		char         err[96];
		sv_list_spec spec;

		CHECK_EQ(sv_list_spec_parse("{\"limit\":100,\"offset\":7}",
		                            &spec, err, sizeof(err)),
		         0);
		CHECK_EQ(spec.limit, 100);
		CHECK_EQ(spec.offset, 7);
		CHECK(json_is_object(spec.filter));
		json_decref(spec.filter);
		CHECK_EQ(sv_list_spec_parse(NULL, &spec, err, sizeof(err)), 0);
		CHECK_EQ(spec.limit, 25);
		CHECK_EQ(spec.offset, 0);
		CHECK_EQ(json_object_size(spec.filter), 0);
		json_decref(spec.filter);
	}
}

/* The client's states are named as the API names them, in its order. */
static void
state_names(void)
{
	CHECK(strcmp(cl_state_name(CS_HEALTHY), "healthy") == 0);
	CHECK(strcmp(cl_state_name(CS_UNSTABLE), "unstable") == 0);
	CHECK(strcmp(cl_state_name(CS_REAUTH), "needs_reauth") == 0);
	CHECK(strcmp(cl_state_name(CS_PENDING), "pending_verification") == 0);
	CHECK(strcmp(cl_state_name(CS_DISABLED), "disabled") == 0);
	CHECK(strcmp(cl_state_name(CS_ERROR), "error") == 0);
	CHECK(strcmp(cl_state_name(CS_COUNT), "?") == 0);
}

/* The first page's entry of name with filter f: its state and
 * node_states (a new object, or NULL). */
static const char *
shown_as(const char *f, const char *name, json_t **ns)
{
	static char  st[32];
	char         err[96];
	sv_list_spec spec;
	json_t      *res, *c;
	size_t       i;

	*ns   = NULL;
	st[0] = '\0';
	CHECK_EQ(sv_list_spec_parse(f, &spec, err, sizeof(err)), 0);
	spec.node = "a";
	res       = sv_list_page(all, nall, &spec);
	json_array_foreach(json_object_get(res, "clients"), i, c)
	{
		if (strcmp(json_string_value(json_object_get(c, "name")),
		           name) == 0) {
			const char *v =
			        json_string_value(json_object_get(c, "state"));
			snprintf(st, sizeof(st), "%s", v != NULL ? v : "");
			*ns = json_incref(json_object_get(c, "node_states"));
		}
	}
	json_decref(res);
	json_decref(spec.filter);
	return (st);
}

/* The other nodes' states fold in (SPEC: Cluster): disagreement among
 * healthy, unstable and pending_verification is degraded; all unstable
 * stays unstable, with node_states; one node, or all healthy, shows
 * none; needs_reauth and disabled are this node's alone. */
static void
cluster_states(void)
{
	model_failure lf      = {.stage = "connect"};
	const sv_peer one[]   = {{"1", "b", "unstable", &lf},
	                         {"1", "c", "healthy", NULL}},
	              two[]   = {{"2", "b", "unstable", NULL},
	                         {"2", "c", "needs_reauth", NULL}},
	              healthy = {"3", "b", "healthy", NULL};
	json_t *ns;

	add("1", "one", CS_HEALTHY, "http", "none", false);
	add("2", "two", CS_UNSTABLE, "http", "none", false);
	add("3", "three", CS_DISABLED, "http", "none", false);
	add("4", "four", CS_HEALTHY, "http", "none", false);
	/* no other node: as this one sees it */
	CHECK(strcmp(shown_as(NULL, "one", &ns), "healthy") == 0 &&
	      ns == NULL);
	all[0]->peers  = one;
	all[0]->npeers = 2;
	all[1]->peers  = two;
	all[1]->npeers = 2;
	all[2]->peers = all[3]->peers = &healthy;
	all[2]->npeers = all[3]->npeers = 1;
	CHECK(strcmp(shown_as(NULL, "one", &ns), "degraded") == 0);
	CHECK_EQ(json_object_size(ns), 3);
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(json_object_get(ns, "b"),
	                                     "last_failure"),
	                     "stage")),
	             "connect") == 0);
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(ns, "a"), "state")),
	             "healthy") == 0);
	json_decref(ns);
	/* all unstable (c's needs_reauth is not folded): unstable, two */
	CHECK(strcmp(shown_as(NULL, "two", &ns), "unstable") == 0);
	CHECK_EQ(json_object_size(ns), 2);
	json_decref(ns);
	/* disabled here: this node's */
	CHECK(strcmp(shown_as(NULL, "three", &ns), "disabled") == 0);
	CHECK(ns == NULL);
	/* all healthy: healthy, no node_states */
	CHECK(strcmp(shown_as(NULL, "four", &ns), "healthy") == 0);
	CHECK(ns == NULL);
	/* the filter sees the cluster's state */
	expect(__LINE__, "{\"state\":\"degraded\"}", "one", 1, 1);
	expect(__LINE__, "{\"state\":\"healthy\"}", "four", 1, 1);
	clear();
}

int
main(int argc, char **argv)
{
	RUN_IF(empty);
	RUN_IF(sorted_by_name);
	RUN_IF(filters);
	RUN_IF(paging);
	RUN_IF(without_view);
	RUN_IF(with_metrics);
	RUN_IF(bad_filter);
	RUN_IF(state_names);
	RUN_IF(cluster_states);
	return (0);
}
