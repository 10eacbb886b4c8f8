/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What NCCL used: the parser of NCCL's INFO lines (orh_nccl_used_parse) on real NCCL
 * 2.28.9 output (tests/nccl/nccl-2.28.9-{socket,p2p}.log: a two-rank torch.distributed
 * all-reduce on two H200, docs/nccl-check.md, rank 0's file with P2P and SHM off, then
 * on), the flag inspect
 * shows (orh_nccl_used_flag), the decision's capture rule (orh_decide_nccl: only where no
 * NCCL_DEBUG* is set in the container's env or the node config's [env]) on the sample node
 * gdr-dmabuf, and the merge's (orh_ncclconf_merge: none where the image's nccl.conf sets
 * one).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node_fixture.h"
#include "orh/decide/decide.h"
#include "orh/node/nccl_used.h"
#include "orh/apply/ncclconf.h"

static struct orh_nccl_used u;

static char *slurp(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *buf = malloc(1 << 20);

	snprintf(path, sizeof(path), "%s/tests/nccl/%s", getenv("ORH_SRCDIR"), name);
	f = fopen(path, "r");
	cr_assert(f, "%s", path);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	buf[*len] = '\0';
	return buf;
}

static void parse_file(const char *name)
{
	size_t len = 0;
	char *text = slurp(name, &len);

	orh_nccl_used_parse(text, len, &u);
	free(text);
}

Test(nccl_used, real_2_28_9_sockets)
{
	char t[96];

	memset(&u, 0, sizeof(u));
	parse_file("nccl-2.28.9-socket.log");
	cr_assert_eq(u.files, 1);
	cr_assert_eq(u.n_comms, 1);
	cr_assert_str_eq(u.comms[0].comm_id, "0x7dd2d326828f362");
	cr_assert_eq(u.comms[0].rank, 0);
	cr_assert_eq(u.comms[0].nranks, 2);
	cr_assert_eq(u.comms[0].pid, 786);
	cr_assert_str_eq(u.comms[0].network, "Socket", "said before Init START in 2.28.9");
	cr_assert_eq(u.comms[0].transports, ORH_NCCL_T_SOCKET);
	cr_assert_eq(u.comms[0].channels, 4, "2 channels, send and receive");
	cr_assert_eq(u.comms[0].n_hcas, 0);
	orh_nccl_transports_text(u.comms[0].transports, t, sizeof(t));
	cr_assert_str_eq(t, "NET/Socket");
}

Test(nccl_used, real_2_28_9_p2p)
{
	memset(&u, 0, sizeof(u));
	parse_file("nccl-2.28.9-p2p.log");
	cr_assert_eq(u.n_comms, 1);
	cr_assert_str_eq(u.comms[0].comm_id, "0xcfa26009cfe89be5");
	cr_assert_eq(u.comms[0].transports, ORH_NCCL_T_P2P, "via P2P/CUMEM alone: %#x",
		     u.comms[0].transports);
	cr_assert_str_eq(u.comms[0].network, "Socket", "the network NCCL would use between nodes");
	cr_assert_geq(u.comms[0].channels, 24);
}

/* Lines written from NCCL 2.28.9's format strings (net_ib.cc:839, net.cc:313 and :359,
 * shm.cc:128, init.cc:428 and :1574): no RDMA NIC was at hand to make them for real */
static const char ib_log[] =
	"node1:4100:4100 [0] NCCL INFO NET/IB : Using [0]mlx5_1:1/RoCE [1]mlx5_2:1/IB [RO]; "
	"OOB eth0:10.0.0.1<0>\n"
	"node1:4100:4100 [0] NCCL INFO Using network IB\n"
	"node1:4100:4100 [0] NCCL INFO ncclCommInitRank comm 0x1000 rank 3 nranks 16 cudaDev 0 "
	"nvmlDev 0 busId 18000 commId 0xabc - Init START\n"
	"node1:4100:4170 [0] NCCL INFO Channel 00/0 : 3[0] -> 4[0] [send] via NET/IB/1/GDRDMA\n"
	"node1:4100:4170 [0] NCCL INFO Channel 01/0 : 2[0] -> 3[0] [receive] via NET/IB/0\n"
	"node1:4100:4100 [0] NCCL INFO Channel 00 : 3[0] -> 2[1] via SHM/direct/direct\n"
	"node1:4100:4200 [1] NCCL INFO ncclCommInitRank comm 0x2000 rank 0 nranks 2 cudaDev 1 "
	"nvmlDev 1 busId 19000 commId 0xdef - Init START\n"
	"node1:4100:4100 [0] NCCL INFO Channel 02/0 : 3[0] -> 4[0] [send] via NET/IB/1/GDRDMA\n"
	"node1:4100:4200 [1] NCCL INFO Channel 00/0 : 0[1] -> 1[0] [send] via NET/Socket/0\n"
	"not an NCCL line via NET/Socket/0\n"
	"node1:4100:4200 [1] NCCL WARN Channel 00/0 : via NET/Socket/0\r\n";

Test(nccl_used, ib_hcas_gdr_and_two_communicators)
{
	char t[96];

	memset(&u, 0, sizeof(u));
	orh_nccl_used_parse(ib_log, strlen(ib_log), &u);
	cr_assert_eq(u.n_comms, 2);
	cr_assert_str_eq(u.comms[0].network, "IB");
	cr_assert_eq(u.comms[0].transports, ORH_NCCL_T_IB_GDR | ORH_NCCL_T_IB | ORH_NCCL_T_SHM,
		     "a line of another thread goes to the last communicator: %#x",
		     u.comms[0].transports);
	cr_assert_eq(u.comms[0].n_hcas, 2);
	cr_assert_str_eq(u.comms[0].hcas[0], "mlx5_2:1", "NET/IB/1 is the list's [1]");
	cr_assert_str_eq(u.comms[0].hcas[1], "mlx5_1:1");
	cr_assert_eq(u.comms[0].rank, 3);
	cr_assert_eq(u.comms[0].nranks, 16);
	/* the second communicator, started on thread 4200: its line, not the others' */
	cr_assert_str_eq(u.comms[1].comm_id, "0xdef");
	cr_assert_eq(u.comms[1].transports, ORH_NCCL_T_SOCKET, "%#x", u.comms[1].transports);
	cr_assert_eq(u.comms[1].channels, 1,
		     "a WARN line and a line without the mark are not read");
	cr_assert_str_empty(u.comms[1].network);
	orh_nccl_transports_text(u.comms[0].transports, t, sizeof(t));
	cr_assert_str_eq(t, "NET/IB+GDR, NET/IB, SHM");
}

Test(nccl_used, lines_before_any_communicator_and_bounds)
{
	static const char text[] =
		"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n";
	char big[64];

	memset(&u, 0, sizeof(u));
	orh_nccl_used_parse(text, strlen(text), &u);
	cr_assert_eq(u.n_comms, 0, "a connection line with no communicator started is dropped");
	for (int i = 0; i < ORH_NCCL_USED_MAX_COMMS + 3; i++) {
		snprintf(big, sizeof(big), "h:1:%d [0] NCCL INFO x comm 0x1 - Init START\n", i);
		orh_nccl_used_parse(big, strlen(big), &u);
	}
	cr_assert_eq(u.n_comms, ORH_NCCL_USED_MAX_COMMS);
	cr_assert_eq(u.comms_dropped, 3);
	cr_assert_eq(u.comms[0].rank, -1, "no rank said");
	orh_nccl_used_parse("", 0, &u);
	cr_assert_eq(u.n_comms, ORH_NCCL_USED_MAX_COMMS);
}

Test(nccl_used, flag_rdma_given_and_sockets_used)
{
	char why[256] = "";

	memset(&u, 0, sizeof(u));
	parse_file("nccl-2.28.9-socket.log");
	cr_assert(orh_nccl_used_flag(&u, true, why, sizeof(why)));
	cr_assert(strstr(why, "NET/Socket in 1 of 1 communicators"), "%s", why);
	cr_assert_not(orh_nccl_used_flag(&u, false, why, sizeof(why)), "no RDMA given: no flag");
	memset(&u, 0, sizeof(u));
	parse_file("nccl-2.28.9-p2p.log");
	cr_assert_not(orh_nccl_used_flag(&u, true, why, sizeof(why)), "P2P within the node");
}

/* ---- the decision's capture rule ------------------------------------------------- */

static char root[256];
static struct orh_config cfg;
static struct orh_decision d;
static struct orh_err err;

static void decide_with(const char *env_entry)
{
	json_t *spec = env_entry ? json_pack("{s:{s:[s, s]}}", "process", "env",
					     "NVIDIA_VISIBLE_DEVICES=all", env_entry)
				 : json_pack("{s:{s:[s]}}", "process", "env",
					     "NVIDIA_VISIBLE_DEVICES=all");
	struct orh_decide_in in = { .cfg = &cfg, .scan = ORH_GIDS_PLAN, .spec = spec };

	if (!root[0])
		fixture_make_node(root, sizeof(root), "orh-ncclrec", "gdr-dmabuf");
	in.sysroot = root;
	orh_decision_free(&d);
	memset(&d, 0, sizeof(d));
	cr_assert_eq(orh_decide(&in, &d, &err), 0, "%s", err.msg);
	cr_assert(d.have_plan && !orh_plan_is_empty(&d.plan));
	json_decref(spec);
}

static const char *env(const char *name)
{
	const struct orh_env_entry *e = orh_plan_env_get(&d.plan, name);

	return e ? e->value : NULL;
}

static void rec_setup(void)
{
	root[0] = '\0';
	orh_config_defaults(&cfg);
	cfg.nccl_record = true;
	memset(&d, 0, sizeof(d));
}

static void rec_cleanup(void)
{
	orh_decision_free(&d);
	orh_config_free(&cfg);
	fixture_remove_node(root);
}

TestSuite(nccl_record, .init = rec_setup, .fini = rec_cleanup);

Test(nccl_record, off_by_default)
{
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	decide_with(NULL);
	cr_assert_not(d.nccl.record);
	cr_assert_null(env("NCCL_DEBUG"));
	cr_assert_null(env("NCCL_DEBUG_FILE"));
	cr_assert_str_eq(d.nccl.record_why, "off: nccl_record = no");
}

Test(nccl_record, on_for_a_container_given_rdma_where_the_config_says_yes)
{
	decide_with(NULL);
	cr_assert(d.nccl.record, "%s", d.nccl.record_why);
	cr_assert_str_eq(env("NCCL_DEBUG"), "INFO");
	cr_assert_str_eq(env("NCCL_DEBUG_SUBSYS"), "INIT,NET");
	cr_assert_str_eq(env("NCCL_DEBUG_FILE"), "/run/oci-rdma-hook-nccl/nccl.%p");
	cr_assert(orh_nccl_record_entry(orh_plan_env_get(&d.plan, "NCCL_DEBUG_FILE")));
	cr_assert_not(orh_nccl_record_entry(orh_plan_env_get(&d.plan, "NCCL_IB_HCA")));
	cr_assert(strstr(d.nccl.record_why, "on: "), "%s", d.nccl.record_why);
}

Test(nccl_record, never_where_the_container_sets_one)
{
	static const char *const users[] = {
		"NCCL_DEBUG=WARN", "NCCL_DEBUG_SUBSYS=ALL", "NCCL_DEBUG_FILE=/tmp/x",
		"NCCL_DEBUG_TIMESTAMP_LEVELS=INFO",
	};

	for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
		decide_with(users[i]);
		cr_assert_not(d.nccl.record, "%s", users[i]);
		cr_assert_null(env("NCCL_DEBUG"), "%s", users[i]);
		cr_assert_null(env("NCCL_DEBUG_SUBSYS"), "%s", users[i]);
		cr_assert_null(env("NCCL_DEBUG_FILE"), "%s", users[i]);
		cr_assert(strstr(d.nccl.record_why, "process.env sets an NCCL_DEBUG"), "%s",
			  d.nccl.record_why);
	}
	decide_with("NCCL_DEBUGX");
	cr_assert(d.nccl.record, "an entry without '=' sets nothing");
}

Test(nccl_record, never_where_the_node_config_sets_one_or_says_no)
{
	static const char conf[] = "[env]\nNCCL_DEBUG_SUBSYS = INIT\n";

	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	cfg.nccl_record = true;
	cr_assert_eq(orh_config_parse_string(&cfg, "node.conf", conf, &err), 0, "%s", err.msg);
	decide_with(NULL);
	cr_assert_not(d.nccl.record);
	cr_assert_null(env("NCCL_DEBUG"));
	cr_assert_null(env("NCCL_DEBUG_FILE"));
	cr_assert(strstr(d.nccl.record_why, "[env]"), "%s", d.nccl.record_why);

	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	cfg.nccl_record = false;
	decide_with(NULL);
	cr_assert_not(d.nccl.record);
	cr_assert_null(env("NCCL_DEBUG"));
	cr_assert_str_eq(d.nccl.record_why, "off: nccl_record = no");
}

/* ---- the merge: the image's /etc/nccl.conf ---------------------------------------- */

Test(nccl_record, the_image_setting_one_keeps_its_lines_and_gets_none)
{
	struct orh_env_entry e[] = {
		{ "NCCL_IB_HCA", "=mlx5_1:1", "rule 3" },
		{ "NCCL_DEBUG", "INFO", ORH_NCCL_RECORD_SOURCE ": x" },
		{ "NCCL_DEBUG_SUBSYS", "INIT,NET", ORH_NCCL_RECORD_SOURCE ": x" },
		{ "NCCL_DEBUG_FILE", ORH_NCCL_RECORD_FILE, ORH_NCCL_RECORD_SOURCE ": x" },
	};
	struct orh_strv kept = { 0 };
	char *out = NULL;
	size_t added = 0;

	cr_assert_eq(orh_ncclconf_merge("NCCL_DEBUG_FILE=/img/%h\n", 24, e, 4, &out, &added,
					&kept, &err), 0, "%s", err.msg);
	cr_assert_eq(added, 1, "NCCL_IB_HCA alone: %s", out);
	cr_assert_null(strstr(out, "NCCL_DEBUG=INFO"), "%s", out);
	cr_assert_null(strstr(out, "NCCL_DEBUG_SUBSYS"), "%s", out);
	cr_assert(strstr(out, "NCCL_DEBUG_FILE=/img/%h\n"), "the image's line stays: %s", out);
	cr_assert_eq(kept.n, 1);
	cr_assert_str_eq(kept.v[0], "NCCL_DEBUG_FILE=/img/%h");
	free(out);
	orh_strv_free(&kept);

	cr_assert_eq(orh_ncclconf_merge("NCCL_SOCKET_NTHREADS=2\n", 23, e, 4, &out, &added,
					&kept, &err), 0, "%s", err.msg);
	cr_assert_eq(added, 4, "no NCCL_DEBUG* in the image: all four: %s", out);
	cr_assert(strstr(out, "NCCL_DEBUG_FILE=/run/oci-rdma-hook-nccl/nccl.%p\n"), "%s", out);
	free(out);
	orh_strv_free(&kept);
}
