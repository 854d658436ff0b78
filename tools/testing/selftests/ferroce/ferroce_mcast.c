// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_mcast: UD multicast through the verbs (ibv_attach_mcast, ibv_detach_mcast).
 *
 *   ferroce_mcast verbs    RXDEV RXADDR
 *   ferroce_mcast fanout   RXDEV RXADDR TXDEV TXADDR GROUP
 *   ferroce_mcast loopback RXDEV RXADDR GROUP
 *   ferroce_mcast hold     RXDEV RXADDR GROUP READY DONE
 *
 * verbs: the device's multicast limits, attach and detach errors, a QP that cannot be destroyed
 * while attached, 56 QPs on a group and 8192 groups (the 57th and 8193rd refused).
 * fanout: QPs of RXDEV attached to GROUP each receive every datagram a QP of TXDEV sends to it
 * (GRH, source QP and payload checked), one that is not attached nothing, one with another
 * Q_Key nothing; the netdev's IGMP or MLD membership (/proc/net/igmp, igmp6: run this in
 * RXDEV's namespace) lasts from the first attach to the last detach.
 * loopback: a sender on RXDEV reaches the QPs of RXDEV attached to GROUP, itself included.
 * hold: three QPs of RXDEV attached to GROUP; creates READY, waits (up to 60 s) for DONE, then
 * prints how many datagrams each received: a test sends crafted packets meanwhile.
 * Prints what it checks ("# ..."); exits 0 if everything held, 1 otherwise.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QKEY 0x1234567
#define MSG 256
#define GRH 40
#define SLOTS 64
#define MCAST_QPN 0xffffff

static int failures;

static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("# %s: ", ok ? "ok" : "FAILED");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		failures++;
}

static void die(const char *what)
{
	printf("# FAILED: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* The GID of ADDR: IPv4-mapped for an IPv4 address. */
static union ibv_gid gid_of(const char *addr)
{
	union ibv_gid gid = {};
	struct in_addr a4;

	if (inet_pton(AF_INET, addr, &a4) == 1) {
		gid.raw[10] = gid.raw[11] = 0xff;
		memcpy(&gid.raw[12], &a4, 4);
	} else if (inet_pton(AF_INET6, addr, gid.raw) != 1) {
		errno = EINVAL;
		die(addr);
	}
	return gid;
}

static bool is_v4(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid->raw, prefix, sizeof(prefix));
}

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int gid_index;
	union ibv_gid gid;
};

static void open_dev(struct dev *d, const char *name, const char *addr)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	union ibv_gid gid;
	int i;

	if (!list)
		die("ibv_get_device_list");
	d->ctx = NULL;
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx)
		die(name);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		die("ibv_alloc_pd");
	d->gid = gid_of(addr);
	for (i = 0; i < 1024; i++)
		if (!ibv_query_gid(d->ctx, 1, i, &gid) && !memcmp(&gid, &d->gid, sizeof(gid)))
			break;
	if (i == 1024) {
		errno = ENOENT;
		die(addr);
	}
	d->gid_index = i;
}

/* A UD QP in RTS with CQs of its own and SLOTS receive buffers of GRH + MSG bytes. */
struct ep {
	struct dev *dev;
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *mr;
	char *buf;
	int posted;
};

static int modify(struct ibv_qp *qp, enum ibv_qp_state state, uint32_t qkey)
{
	struct ibv_qp_attr a = { .qp_state = state, .qkey = qkey };
	int mask = IBV_QP_STATE;

	if (state == IBV_QPS_INIT) {
		a.port_num = 1;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else if (state == IBV_QPS_RTS) {
		mask |= IBV_QP_SQ_PSN;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static struct ibv_qp *new_qp(struct dev *d, struct ibv_cq *scq, struct ibv_cq *rcq,
			     enum ibv_qp_type type)
{
	struct ibv_qp_init_attr init = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = { .max_send_wr = 16, .max_recv_wr = SLOTS, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = type,
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &init);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

static void post_recv(struct ep *e)
{
	int slot = e->posted++ % SLOTS;
	struct ibv_sge sge = {
		.addr = (uintptr_t)(e->buf + slot * (GRH + MSG)),
		.length = GRH + MSG,
		.lkey = e->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(e->qp, &wr, &bad))
		die("ibv_post_recv");
}

static void new_ep(struct ep *e, struct dev *d)
{
	int i;

	e->dev = d;
	e->posted = 0;
	e->scq = ibv_create_cq(d->ctx, SLOTS, NULL, NULL, 0);
	e->rcq = ibv_create_cq(d->ctx, SLOTS, NULL, NULL, 0);
	/* One more slot than receives: the last is the send buffer. */
	e->buf = calloc(SLOTS + 1, GRH + MSG);
	if (!e->scq || !e->rcq || !e->buf)
		die("ibv_create_cq");
	e->mr = ibv_reg_mr(d->pd, e->buf, (SLOTS + 1) * (GRH + MSG), IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr)
		die("ibv_reg_mr");
	e->qp = new_qp(d, e->scq, e->rcq, IBV_QPT_UD);
	if (modify(e->qp, IBV_QPS_INIT, QKEY) || modify(e->qp, IBV_QPS_RTR, 0) ||
	    modify(e->qp, IBV_QPS_RTS, 0))
		die("ibv_modify_qp");
	for (i = 0; i < SLOTS / 2; i++)
		post_recv(e);
}

static void free_ep(struct ep *e)
{
	if (ibv_destroy_qp(e->qp) || ibv_dereg_mr(e->mr) || ibv_destroy_cq(e->scq) ||
	    ibv_destroy_cq(e->rcq))
		die("destroying an endpoint");
	free(e->buf);
}

static uint8_t pattern(int msgno, int i)
{
	return (uint8_t)(msgno * 31 + i * 7 + 1);
}

static struct ibv_ah *group_ah(struct dev *d, const union ibv_gid *group)
{
	struct ibv_ah_attr a = {
		.is_global = 1,
		.grh = { .dgid = *group, .sgid_index = d->gid_index, .hop_limit = 8 },
		.port_num = 1,
	};
	struct ibv_ah *ah = ibv_create_ah(d->pd, &a);

	if (!ah)
		die("ibv_create_ah");
	return ah;
}

/* Sends message MSGNO from E through AH (to a group); waits for its completion. */
static void send_msg(struct ep *e, struct ibv_ah *ah, int msgno)
{
	char *at = e->buf + SLOTS * (GRH + MSG);
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = MSG, .lkey = e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = msgno,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = MCAST_QPN, .remote_qkey = QKEY },
	}, *bad;
	struct ibv_wc wc;
	int i;

	for (i = 0; i < MSG; i++)
		at[i] = pattern(msgno, i);
	if (ibv_post_send(e->qp, &wr, &bad))
		die("ibv_post_send");
	for (i = 0; i < 5000 && ibv_poll_cq(e->scq, 1, &wc) == 0; i++)
		usleep(1000);
	if (i == 5000 || wc.status != IBV_WC_SUCCESS)
		die("send completion");
}

/*
 * Whether E receives exactly the messages FIRST..FIRST+N-1, in order, from QP SRC_QP of FROM,
 * to GROUP.
 */
static bool received(struct ep *e, int first, int n, uint32_t src_qp, const union ibv_gid *from,
		     const union ibv_gid *group)
{
	struct ibv_wc wc;
	int got = 0, idle = 0, i;
	bool ok = true;
	char *at;

	/* Up to 3 s for what is expected, then 300 ms for more; 1 s when nothing is. */
	while (idle < (got < n ? 3000 : n ? 300 : 1000)) {
		if (ibv_poll_cq(e->rcq, 1, &wc) == 0) {
			usleep(1000);
			idle++;
			continue;
		}
		idle = 0;
		at = e->buf + wc.wr_id * (GRH + MSG);
		if (got >= n || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    wc.byte_len != GRH + MSG || wc.src_qp != src_qp || !(wc.wc_flags & IBV_WC_GRH)) {
			printf("# qp %u: unexpected completion %d: status %d opcode %d len %u src %u\n",
			       e->qp->qp_num, got, wc.status, wc.opcode, wc.byte_len, wc.src_qp);
			ok = false;
		} else if (is_v4(group) ? memcmp(at + 32, &from->raw[12], 4) ||
					     memcmp(at + 36, &group->raw[12], 4) :
					   memcmp(at + 8, from->raw, 16) ||
					     memcmp(at + 24, group->raw, 16)) {
			printf("# qp %u: message %d: wrong addresses in the GRH\n", e->qp->qp_num,
			       got);
			ok = false;
		} else {
			for (i = 0; i < MSG; i++)
				if ((uint8_t)at[GRH + i] != pattern(first + got, i))
					break;
			if (i < MSG) {
				printf("# qp %u: message %d: byte %d wrong\n", e->qp->qp_num, got, i);
				ok = false;
			}
		}
		got++;
		post_recv(e);
	}
	if (got != n)
		printf("# qp %u: %d messages received, %d expected\n", e->qp->qp_num, got, n);
	return ok && got == n;
}

/* Whether the namespace's netdevs are members of GROUP (/proc/net/igmp or igmp6). */
static bool member(const union ibv_gid *group)
{
	char want[40], line[256];
	bool found = false;
	FILE *f;
	int i;

	if (is_v4(group)) {
		uint32_t a;

		memcpy(&a, &group->raw[12], 4);
		snprintf(want, sizeof(want), "%08X", a);
		f = fopen("/proc/net/igmp", "r");
	} else {
		for (i = 0; i < 16; i++)
			sprintf(want + 2 * i, "%02x", group->raw[i]);
		f = fopen("/proc/net/igmp6", "r");
	}
	if (!f)
		die("/proc/net/igmp");
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, want) != NULL;
	fclose(f);
	return found;
}

static int err_of(int ret)
{
	return ret < 0 ? errno : ret;
}

static void verbs(struct dev *d)
{
	union ibv_gid g = gid_of("239.7.7.7"), g2 = gid_of("239.7.7.8"), other;
	struct ibv_qp *qps[57], *rc;
	struct ibv_device_attr attr;
	struct ep e;
	int i, ret;

	if (ibv_query_device(d->ctx, &attr))
		die("ibv_query_device");
	check(attr.max_mcast_grp == 8192 && attr.max_mcast_qp_attach == 56 &&
	      attr.max_total_mcast_qp_attach == 0x70000,
	      "limits as C rxe's: %d groups, %d QPs each, %d in all", attr.max_mcast_grp,
	      attr.max_mcast_qp_attach, attr.max_total_mcast_qp_attach);
	new_ep(&e, d);
	check(ibv_attach_mcast(e.qp, &g, 0) == 0, "a UD QP attaches");
	/* uverbs filters a repeat with the same MLID; RoCE ignores MLIDs, the core counts each. */
	check(ibv_attach_mcast(e.qp, &g, 0) == 0 && ibv_attach_mcast(e.qp, &g, 1) == 0 &&
	      ibv_attach_mcast(e.qp, &g, 2) == 0, "attaching it again, under other MLIDs too");
	check(ibv_detach_mcast(e.qp, &g, 1) == 0 && ibv_detach_mcast(e.qp, &g, 2) == 0 &&
	      member(&g), "each attach has its detach; the group stays while one is left");
	/* The core's checks (before the driver): each would be a driver bug if it passed. */
	rc = new_qp(d, e.scq, e.rcq, IBV_QPT_RC);
	check(err_of(ibv_attach_mcast(rc, &g, 0)) == EINVAL, "an RC QP is refused");
	check(err_of(ibv_attach_mcast(e.qp, &d->gid, 0)) == EINVAL,
	      "a unicast GID is refused");
	check(err_of(ibv_detach_mcast(e.qp, &g2, 0)) == EINVAL,
	      "detaching from a group it is not in is refused");
	check(err_of(ibv_destroy_qp(e.qp)) == EBUSY, "an attached QP is not destroyed");
	check(ibv_detach_mcast(e.qp, &g, 0) == 0 && !member(&g),
	      "its last detach leaves the group");

	/* 56 QPs on one group. */
	for (i = 0; i < 57; i++)
		qps[i] = new_qp(d, e.scq, e.rcq, IBV_QPT_UD);
	for (i = 0; i < 57; i++) {
		ret = err_of(ibv_attach_mcast(qps[i], &g, 0));
		if (ret != (i < 56 ? 0 : ENOMEM))
			break;
	}
	check(i == 57, "56 QPs attach to a group, the 57th is refused (ENOMEM): stopped at %d", i);
	if (i == 57) {
		check(ibv_detach_mcast(qps[0], &g, 0) == 0 &&
		      ibv_attach_mcast(qps[56], &g, 0) == 0,
		      "once one detaches, the 57th attaches");
		check(ibv_detach_mcast(qps[56], &g, 0) == 0, "and detaches");
		for (i = 1; i < 56; i++)
			if (ibv_detach_mcast(qps[i], &g, 0))
				break;
		check(i == 56 && !member(&g), "all detach; the netdev left the group");
	}

	/* 8192 groups. */
	other = g;
	for (i = 0; i < 8193; i++) {
		other.raw[13] = 8 + (i >> 8);
		other.raw[15] = i & 0xff;
		ret = err_of(ibv_attach_mcast(qps[1], &other, 0));
		if (ret != (i < 8192 ? 0 : ENOMEM))
			break;
	}
	check(i == 8193, "8192 groups, the 8193rd refused (ENOMEM): stopped at %d", i);
	for (i = 0; i < 8192; i++) {
		other.raw[13] = 8 + (i >> 8);
		other.raw[15] = i & 0xff;
		if (ibv_detach_mcast(qps[1], &other, 0))
			break;
	}
	check(i == 8192, "and each detaches: %d", i);
	for (i = 0; i < 57; i++)
		if (ibv_destroy_qp(qps[i]))
			break;
	check(i == 57 && ibv_destroy_qp(rc) == 0,
	      "every QP is destroyed once its attaches are undone");
	free_ep(&e);
}

static void fanout(struct dev *rx, struct dev *tx, const union ibv_gid *g)
{
	struct ep q[3], s;
	struct ibv_ah *ah;
	int m = 0;

	new_ep(&s, tx);
	ah = group_ah(tx, g);
	new_ep(&q[0], rx);
	new_ep(&q[1], rx);
	new_ep(&q[2], rx);
	check(!member(g), "the netdev is not in the group before an attach");
	if (ibv_attach_mcast(q[0].qp, g, 0) || ibv_attach_mcast(q[1].qp, g, 0) ||
	    ibv_attach_mcast(q[0].qp, g, 7))
		die("ibv_attach_mcast");
	check(member(g), "the netdev joined the group (IGMP/MLD)");
	for (; m < 8; m++)
		send_msg(&s, ah, m);
	check(received(&q[0], 0, 8, s.qp->qp_num, &tx->gid, g) &&
	      received(&q[1], 0, 8, s.qp->qp_num, &tx->gid, g) &&
	      received(&q[2], 0, 0, 0, NULL, g),
	      "8 datagrams reach both attached QPs, not the third");

	if (ibv_modify_qp(q[1].qp, &(struct ibv_qp_attr){ .qkey = QKEY + 1 }, IBV_QP_QKEY))
		die("ibv_modify_qp(QKEY)");
	send_msg(&s, ah, m);
	check(received(&q[0], m, 1, s.qp->qp_num, &tx->gid, g) &&
	      received(&q[1], 0, 0, 0, NULL, g),
	      "a member with another Q_Key drops it, the other takes it");
	m++;
	if (ibv_modify_qp(q[1].qp, &(struct ibv_qp_attr){ .qkey = QKEY }, IBV_QP_QKEY))
		die("ibv_modify_qp(QKEY)");

	if (ibv_detach_mcast(q[0].qp, g, 0))
		die("ibv_detach_mcast");
	send_msg(&s, ah, m);
	check(received(&q[1], m, 1, s.qp->qp_num, &tx->gid, g) &&
	      received(&q[0], m, 1, s.qp->qp_num, &tx->gid, g),
	      "a QP attached twice (two MLIDs) and detached once still receives");
	m++;
	if (ibv_detach_mcast(q[0].qp, g, 7))
		die("ibv_detach_mcast");
	send_msg(&s, ah, m);
	check(received(&q[1], m, 1, s.qp->qp_num, &tx->gid, g) &&
	      received(&q[0], 0, 0, 0, NULL, g) && member(g),
	      "detached twice, it receives nothing, the other still does");
	m++;

	if (ibv_detach_mcast(q[1].qp, g, 0))
		die("ibv_detach_mcast");
	send_msg(&s, ah, m++);
	check(received(&q[0], 0, 0, 0, NULL, g) && received(&q[1], 0, 0, 0, NULL, g) &&
	      !member(g), "with no member left the netdev left the group, and nothing arrives");

	if (ibv_attach_mcast(q[2].qp, g, 0))
		die("ibv_attach_mcast");
	send_msg(&s, ah, m);
	check(received(&q[2], m, 1, s.qp->qp_num, &tx->gid, g) && member(g),
	      "attached again, the group works again");
	if (ibv_detach_mcast(q[2].qp, g, 0))
		die("ibv_detach_mcast");
	ibv_destroy_ah(ah);
	free_ep(&q[0]);
	free_ep(&q[1]);
	free_ep(&q[2]);
	free_ep(&s);
}

static void loopback(struct dev *d, const union ibv_gid *g)
{
	struct ep q, s;
	struct ibv_ah *ah;

	new_ep(&q, d);
	new_ep(&s, d);
	ah = group_ah(d, g);
	if (ibv_attach_mcast(q.qp, g, 0) || ibv_attach_mcast(s.qp, g, 0))
		die("ibv_attach_mcast");
	send_msg(&s, ah, 0);
	send_msg(&s, ah, 1);
	check(received(&q, 0, 2, s.qp->qp_num, &d->gid, g) &&
	      received(&s, 0, 2, s.qp->qp_num, &d->gid, g),
	      "a sender on the same device reaches its members, itself included");
	if (ibv_detach_mcast(q.qp, g, 0) || ibv_detach_mcast(s.qp, g, 0))
		die("ibv_detach_mcast");
	ibv_destroy_ah(ah);
	free_ep(&q);
	free_ep(&s);
}

static void hold(struct dev *d, const union ibv_gid *g, const char *ready, const char *done)
{
	struct ibv_wc wc;
	struct ep q[3];
	int i, n, t;
	FILE *f;

	for (i = 0; i < 3; i++) {
		new_ep(&q[i], d);
		if (ibv_attach_mcast(q[i].qp, g, 0))
			die("ibv_attach_mcast");
	}
	f = fopen(ready, "w");
	if (!f)
		die(ready);
	fclose(f);
	for (t = 0; t < 600 && access(done, F_OK); t++)
		usleep(100000);
	check(t < 600, "%s came", done);
	for (i = 0; i < 3; i++) {
		/* Until 500 ms pass without one: some may still wait in a QP's backlog. */
		for (n = 0, t = 0; t < 500; t++) {
			if (ibv_poll_cq(q[i].rcq, 1, &wc) == 1) {
				n++;
				t = 0;
				continue;
			}
			usleep(1000);
		}
		printf("# qp %u received %d\n", q[i].qp->qp_num, n);
		if (ibv_detach_mcast(q[i].qp, g, 0))
			die("ibv_detach_mcast");
		free_ep(&q[i]);
	}
}

int main(int argc, char **argv)
{
	struct dev rx, tx;
	union ibv_gid g;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "verbs")) {
		open_dev(&rx, argv[2], argv[3]);
		verbs(&rx);
	} else if (argc == 7 && !strcmp(argv[1], "fanout")) {
		open_dev(&rx, argv[2], argv[3]);
		open_dev(&tx, argv[4], argv[5]);
		g = gid_of(argv[6]);
		fanout(&rx, &tx, &g);
	} else if (argc == 5 && !strcmp(argv[1], "loopback")) {
		open_dev(&rx, argv[2], argv[3]);
		g = gid_of(argv[4]);
		loopback(&rx, &g);
	} else if (argc == 7 && !strcmp(argv[1], "hold")) {
		open_dev(&rx, argv[2], argv[3]);
		g = gid_of(argv[4]);
		hold(&rx, &g, argv[5], argv[6]);
	} else {
		fprintf(stderr, "usage: see the comment at the top of %s.c\n", argv[0]);
		return 2;
	}
	return failures ? 1 : 0;
}
