/*
 * Layout probe of the verbs4j layout cross-check: prints what the C compiler thinks of the
 * types verbs4j maps, so that the Java layouts can be compared with it number by number.
 *
 * The test (io.github.verbs4j.layout.CLayouts) compiles this file at test time against the
 * system headers, with the headers under test force-included (gcc -include ...) and with a
 * generated layout_probe_queries.h that lists what to measure, one macro call per line:
 *
 *   PROBE_TYPE(id, type)                    -> "id  type    sizeof  alignof"
 *   PROBE_MEMBER(id, type, member)          -> "id  member  offsetof  sizeof"
 *   PROBE_FLEXIBLE_MEMBER(id, type, member) -> "id  member  offsetof  -"
 *
 * A member is a designator as offsetof accepts it ("wr.rdma.remote_addr", "gid_tbl[0].raw").
 * A flexible array member has no sizeof, hence the third form. Fields are tab-separated.
 * The ids only let the test match answers to questions; this file knows no struct by name.
 */
#include <stddef.h>
#include <stdio.h>

#define PROBE_TYPE(id, type) \
	printf("%d\ttype\t%zu\t%zu\n", (id), sizeof(type), _Alignof(type));
#define PROBE_MEMBER(id, type, member) \
	printf("%d\tmember\t%zu\t%zu\n", (id), offsetof(type, member), sizeof(((type *)0)->member));
#define PROBE_FLEXIBLE_MEMBER(id, type, member) \
	printf("%d\tmember\t%zu\t-\n", (id), offsetof(type, member));

int main(void)
{
#include "layout_probe_queries.h"
	return fflush(stdout) == 0 ? 0 : 1;
}
