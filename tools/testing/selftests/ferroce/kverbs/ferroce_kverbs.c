// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_kverbs: verbs that only kernel consumers reach, run against one device for
 * ferroce's selftests. Loading runs the checks; a check that does not hold fails the load
 * (-EINVAL, with a log line naming it), so a loaded module has passed.
 *
 *   insmod ferroce_kverbs.ko dev=NAME [only=ah|qps|frwr]
 *
 * (NAME has a RoCE v2 GID of an IPv4 address; only= runs one group of checks.)
 *
 * Checks: an address handle reads back as it was created (rdma_query_ah); kernel RC and UC
 * QPs, connected to each other through the device's loopback, move SENDs (several packets,
 * immediate data, inline), report a bad lkey, and drain (ib_drain_qp) with what is still posted
 * flushed, all through an IB_POLL_SOFTIRQ CQ; fast registration (ib_map_mr_sg, IB_WR_REG_MR)
 * gives a peer RDMA WRITE and READ into two pages until SEND_WITH_INV or LOCAL_INV ends it.
 */
#include <linux/completion.h>
#include <linux/gfp.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev;
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the RDMA device to check");
static char *only;
module_param(only, charp, 0444);
MODULE_PARM_DESC(only, "run only these checks: ah, qps or frwr");

static int result;
static bool found;

/* The first RoCE v2 GID of an IPv4 address on port 1 (a reference held), or NULL. */
static const struct ib_gid_attr *ipv4_roce_v2_gid(struct ib_device *ibdev)
{
	const struct ib_gid_attr *attr;
	u32 i;

	for (i = 0; i < ibdev->port_data[1].immutable.gid_tbl_len; i++) {
		attr = rdma_get_gid_attr(ibdev, 1, i);
		if (IS_ERR(attr))
			continue;
		if (attr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
		    ipv6_addr_v4mapped((struct in6_addr *)attr->gid.raw))
			return attr;
		rdma_put_gid_attr(attr);
	}
	return NULL;
}

#define EXPECT(cond)                                                    \
	do {                                                            \
		if (!(cond)) {                                          \
			pr_err("ferroce_kverbs: %s: %s does not hold\n", \
			       dev_name(&ibdev->dev), #cond);           \
			ret = -EINVAL;                                  \
		}                                                       \
	} while (0)

static int check_query_ah(struct ib_device *ibdev)
{
	static const u8 dmac[ETH_ALEN] = { 0x02, 0, 0, 0x12, 0x34, 0x56 };
	/* ::ffff:192.0.2.99 */
	static const u8 dgid[16] = { [10] = 0xff, [11] = 0xff, 192, 0, 2, 99 };
	struct rdma_ah_attr attr = {}, back = {};
	const struct ib_gid_attr *sgid;
	struct ib_pd *pd;
	struct ib_ah *ah;
	int ret = 0;

	sgid = ipv4_roce_v2_gid(ibdev);
	if (!sgid) {
		pr_err("ferroce_kverbs: %s: no RoCE v2 GID of an IPv4 address\n",
		       dev_name(&ibdev->dev));
		return -ENODEV;
	}
	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd)) {
		ret = PTR_ERR(pd);
		goto put_gid;
	}
	attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr, 1);
	rdma_ah_set_sl(&attr, 3);
	rdma_ah_set_grh(&attr, (union ib_gid *)dgid, 0x12345, sgid->index, 17, 0x68);
	attr.grh.sgid_attr = sgid;
	memcpy(attr.roce.dmac, dmac, ETH_ALEN);
	ah = rdma_create_ah(pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(ah)) {
		ret = PTR_ERR(ah);
		pr_err("ferroce_kverbs: %s: rdma_create_ah: %d\n", dev_name(&ibdev->dev), ret);
		goto dealloc_pd;
	}
	/* Every field set, so none reads back right by chance. */
	memset(&back, 0xa5, sizeof(back));
	ret = rdma_query_ah(ah, &back);
	if (ret) {
		pr_err("ferroce_kverbs: %s: rdma_query_ah: %d\n", dev_name(&ibdev->dev), ret);
	} else {
		EXPECT(back.type == RDMA_AH_ATTR_TYPE_ROCE);
		EXPECT(rdma_ah_get_port_num(&back) == 1);
		EXPECT(rdma_ah_get_sl(&back) == 3);
		EXPECT(rdma_ah_get_ah_flags(&back) == IB_AH_GRH);
		EXPECT(!memcmp(back.grh.dgid.raw, dgid, sizeof(dgid)));
		EXPECT(back.grh.sgid_index == sgid->index);
		EXPECT(back.grh.flow_label == 0x12345);
		EXPECT(back.grh.hop_limit == 17);
		EXPECT(back.grh.traffic_class == 0x68);
		EXPECT(rdma_ah_get_static_rate(&back) == 0);
		EXPECT(!back.grh.sgid_attr);
		EXPECT(!memcmp(back.roce.dmac, dmac, ETH_ALEN));
	}
	rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
dealloc_pd:
	ib_dealloc_pd(pd);
put_gid:
	rdma_put_gid_attr(sgid);
	return ret;
}

/* One WR's completion, as its cqe callback saw it. */
struct kv_wait {
	struct ib_cqe cqe;
	struct completion done;
	struct ib_wc wc;
};

static void kv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kv_wait *w = container_of(wc->wr_cqe, struct kv_wait, cqe);

	w->wc = *wc;
	complete(&w->done);
}

static void kv_wait_init(struct kv_wait *w)
{
	w->cqe.done = kv_done;
	init_completion(&w->done);
	memset(&w->wc, 0, sizeof(w->wc));
	w->wc.status = -1;
}

/* Waits for a WR's completion; false (and a log line) if none came within 10 s. */
static bool kv_wait_done(struct ib_device *ibdev, struct kv_wait *w, const char *what)
{
	if (wait_for_completion_timeout(&w->done, 10 * HZ)) {
		if (w->wc.status != IB_WC_SUCCESS)
			pr_info("ferroce_kverbs: %s: %s completed with status %d (%s)\n",
				dev_name(&ibdev->dev), what, w->wc.status,
				ib_wc_status_msg(w->wc.status));
		return true;
	}
	pr_err("ferroce_kverbs: %s: no completion for %s\n", dev_name(&ibdev->dev), what);
	return false;
}

/* Takes a (RESET) QP to RTS, connected to @dest_qpn at the device's own address @sgid. */
static int kv_connect(struct ib_qp *qp, u32 dest_qpn, const struct ib_gid_attr *sgid)
{
	struct ib_qp_attr attr = {};
	struct net_device *ndev;
	int ret;

	attr.qp_state = IB_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = 1;
	attr.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	ret = ib_modify_qp(qp, &attr,
			   IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = 100;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 1;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, 1);
	rdma_ah_set_grh(&attr.ah_attr, (union ib_gid *)&sgid->gid, 0, sgid->index, 64, 0);
	attr.ah_attr.grh.sgid_attr = sgid;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(sgid);
	if (IS_ERR(ndev)) {
		rcu_read_unlock();
		return PTR_ERR(ndev);
	}
	memcpy(attr.ah_attr.roce.dmac, ndev->dev_addr, ETH_ALEN);
	rcu_read_unlock();
	ret = ib_modify_qp(qp, &attr,
			   IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN |
			   IB_QP_RQ_PSN |
			   (qp->qp_type == IB_QPT_RC ?
				    IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER : 0));
	if (ret)
		return ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 100;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 1;
	return ib_modify_qp(qp, &attr,
			    IB_QP_STATE | IB_QP_SQ_PSN |
			    (qp->qp_type == IB_QPT_RC ?
				     IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
				     IB_QP_MAX_QP_RD_ATOMIC : 0));
}

static int kv_post_recv(struct ib_qp *qp, struct kv_wait *w, u64 addr, u32 len)
{
	struct ib_sge sge = { .addr = addr, .length = len, .lkey = qp->pd->local_dma_lkey };
	struct ib_recv_wr wr = { .wr_cqe = &w->cqe, .sg_list = &sge, .num_sge = len ? 1 : 0 };

	kv_wait_init(w);
	return ib_post_recv(qp, &wr, NULL);
}

static int kv_post_send(struct ib_qp *qp, struct kv_wait *w, enum ib_wr_opcode opcode,
			int flags, u64 addr, u32 len, u32 lkey, __be32 imm)
{
	struct ib_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ib_send_wr wr = {
		.wr_cqe = &w->cqe,
		.opcode = opcode,
		.send_flags = IB_SEND_SIGNALED | flags,
		.sg_list = &sge,
		.num_sge = 1,
		.ex.imm_data = imm,
	};

	kv_wait_init(w);
	return ib_post_send(qp, &wr, NULL);
}

/* Posts a WR of @qp whose completion @w waits for; @wr's wr_cqe and flags are set here. */
static int kv_post(struct ib_qp *qp, struct kv_wait *w, struct ib_send_wr *wr)
{
	kv_wait_init(w);
	wr->wr_cqe = &w->cqe;
	wr->send_flags |= IB_SEND_SIGNALED;
	return ib_post_send(qp, wr, NULL);
}

/* Registers @mr under a new key with remote read and write, from @qp's send queue. */
static int kv_reg_mr(struct ib_device *ibdev, struct ib_qp *qp, struct kv_wait *w,
		     struct ib_mr *mr)
{
	struct ib_reg_wr reg = {
		.wr.opcode = IB_WR_REG_MR,
		.mr = mr,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ,
	};
	int err;

	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	reg.key = mr->rkey;
	err = kv_post(qp, w, &reg.wr);
	if (err || !kv_wait_done(ibdev, w, "a REG_MR"))
		return err ?: -ETIMEDOUT;
	return w->wc.status == IB_WC_SUCCESS && w->wc.opcode == IB_WC_REG_MR ? 0 : -EIO;
}

/* An RDMA WRITE or READ of @len bytes between @local (under the PD's DMA key) and @rkey. */
static int kv_rdma(struct ib_device *ibdev, struct ib_qp *qp, struct kv_wait *w,
		   enum ib_wr_opcode op, u64 local, u32 len, u64 remote, u32 rkey)
{
	struct ib_sge sge = { .addr = local, .length = len, .lkey = qp->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr.opcode = op,
		.wr.sg_list = &sge,
		.wr.num_sge = 1,
		.remote_addr = remote,
		.rkey = rkey,
	};
	int err = kv_post(qp, w, &wr.wr);

	if (err || !kv_wait_done(ibdev, w, op == IB_WR_RDMA_READ ? "a READ" : "a WRITE"))
		return err ?: -ETIMEDOUT;
	return 0;
}

/* Posts a LOCAL_INV of @key from @qp and waits for it. */
static int kv_local_inv(struct ib_device *ibdev, struct ib_qp *qp, struct kv_wait *w, u32 key)
{
	struct ib_send_wr inv = { .opcode = IB_WR_LOCAL_INV, .ex.invalidate_rkey = key };
	int err = kv_post(qp, w, &inv);

	if (err || !kv_wait_done(ibdev, w, "a LOCAL_INV"))
		return err ?: -ETIMEDOUT;
	return 0;
}

/*
 * @a registers its own @src by FRWR and posts, in one list, a WRITE from that registration to
 * @rkey at @remote and a LOCAL_INV of it: the invalidation waits for the WRITE, which completes.
 */
static int check_inv_after_use(struct ib_device *ibdev, struct ib_qp *a, struct kv_wait *sw,
			       struct kv_wait *rw, u8 *src, u64 remote, u32 rkey, u8 *landed)
{
	struct scatterlist sg;
	struct ib_mr *lmr;
	int ret = 0, err;

	lmr = ib_alloc_mr(a->pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(lmr))
		return PTR_ERR(lmr);
	sg_init_one(&sg, src, 3000);
	err = ib_dma_map_sg(ibdev, &sg, 1, DMA_TO_DEVICE) == 1 ? 0 : -EIO;
	if (err)
		goto dereg;
	EXPECT(ib_map_mr_sg(lmr, &sg, 1, NULL, PAGE_SIZE) == 1);
	err = kv_reg_mr(ibdev, a, sw, lmr);
	if (err)
		goto unmap;
	{
		struct ib_sge sge = { .addr = lmr->iova, .length = 3000, .lkey = lmr->lkey };
		struct ib_send_wr inv = { .wr_cqe = &rw->cqe, .opcode = IB_WR_LOCAL_INV,
					  .send_flags = IB_SEND_SIGNALED,
					  .ex.invalidate_rkey = lmr->lkey };
		struct ib_rdma_wr wr = {
			.wr.next = &inv,
			.wr.wr_cqe = &sw->cqe,
			.wr.opcode = IB_WR_RDMA_WRITE,
			.wr.send_flags = IB_SEND_SIGNALED,
			.wr.sg_list = &sge,
			.wr.num_sge = 1,
			.remote_addr = remote,
			.rkey = rkey,
		};

		kv_wait_init(sw);
		kv_wait_init(rw);
		memset(landed, 0, 3000);
		err = ib_post_send(a, &wr.wr, NULL);
		if (err || !kv_wait_done(ibdev, sw, "a WRITE from a registration") ||
		    !kv_wait_done(ibdev, rw, "the LOCAL_INV after it")) {
			err = err ?: -ETIMEDOUT;
			goto unmap;
		}
		EXPECT(sw->wc.status == IB_WC_SUCCESS && rw->wc.status == IB_WC_SUCCESS);
		EXPECT(!memcmp(landed, src, 3000));
	}
unmap:
	ib_dma_unmap_sg(ibdev, &sg, 1, DMA_TO_DEVICE);
dereg:
	ib_dereg_mr(lmr);
	return err ?: ret;
}

#define FRWR_OFF 100 /* the registered range starts there in its first page */
#define FRWR_LEN 5000 /* and spans two pages */

/*
 * @b registers two pages of its own by FRWR; @a WRITEs across the page boundary and READs the
 * range back; @a's SEND_WITH_INV ends the registration, which @b's receive reports (and @b's
 * LOCAL_INV of it after is done at once); a REG_MR whose key names another region, or a map
 * with a page size below 4 KiB, is refused; a second registration under a new key works
 * (check_inv_after_use() writes into it) until @b's LOCAL_INV; then @a's WRITE with that key
 * fails (IB_WC_REM_ACCESS_ERR), which leaves @a in the error state.
 */
static int check_frwr(struct ib_device *ibdev, struct ib_qp *a, struct ib_qp *b,
		      struct kv_wait *sw, struct kv_wait *rw, u8 *src, u64 src_dma, u8 *dst,
		      u64 dst_dma)
{
	struct scatterlist sg;
	struct ib_mr *mr;
	u8 *region;
	u32 rkey;
	int ret = 0, err, n;

	region = (u8 *)__get_free_pages(GFP_KERNEL | __GFP_ZERO, 1);
	if (!region)
		return -ENOMEM;
	mr = ib_alloc_mr(b->pd, IB_MR_TYPE_MEM_REG, 4);
	if (IS_ERR(mr)) {
		err = PTR_ERR(mr);
		goto free_region;
	}
	sg_init_one(&sg, region + FRWR_OFF, FRWR_LEN);
	n = ib_dma_map_sg(ibdev, &sg, 1, DMA_BIDIRECTIONAL);
	err = n == 1 ? 0 : -EIO;
	if (err)
		goto dereg;
	/* A page size the device does not take is refused when mapping. */
	EXPECT(ib_map_mr_sg(mr, &sg, 1, NULL, SZ_2K) < 0);
	n = ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE);
	EXPECT(n == 1);
	EXPECT(mr->length == FRWR_LEN && mr->iova == (u64)(uintptr_t)(region + FRWR_OFF));

	err = kv_reg_mr(ibdev, b, sw, mr);
	if (err)
		goto unmap;
	/* Across the page boundary (region offset 4096). */
	err = kv_rdma(ibdev, a, sw, IB_WR_RDMA_WRITE, src_dma, 3000, mr->iova + 1000, mr->rkey);
	if (err)
		goto unmap;
	EXPECT(sw->wc.status == IB_WC_SUCCESS && sw->wc.opcode == IB_WC_RDMA_WRITE);
	EXPECT(!memcmp(region + FRWR_OFF + 1000, src, 3000));
	memset(dst, 0, PAGE_SIZE);
	err = kv_rdma(ibdev, a, sw, IB_WR_RDMA_READ, dst_dma, 4000, mr->iova, mr->rkey);
	if (err)
		goto unmap;
	EXPECT(sw->wc.status == IB_WC_SUCCESS && sw->wc.opcode == IB_WC_RDMA_READ);
	EXPECT(!memcmp(dst, region + FRWR_OFF, 4000));

	/* SEND_WITH_INV: b's receive reports the key it invalidated. */
	rkey = mr->rkey;
	err = kv_post_recv(b, rw, dst_dma, PAGE_SIZE);
	if (!err) {
		struct ib_sge sge = { .addr = src_dma, .length = 8, .lkey = a->pd->local_dma_lkey };
		struct ib_send_wr wr = { .opcode = IB_WR_SEND_WITH_INV, .sg_list = &sge,
					 .num_sge = 1, .ex.invalidate_rkey = rkey };

		err = kv_post(a, sw, &wr);
	}
	if (err || !kv_wait_done(ibdev, sw, "a SEND_WITH_INV")) {
		err = err ?: -ETIMEDOUT;
		goto unmap;
	}
	EXPECT(sw->wc.status == IB_WC_SUCCESS);
	if (!kv_wait_done(ibdev, rw, "a receive of SEND_WITH_INV")) {
		err = -ETIMEDOUT;
		goto unmap;
	}
	EXPECT(rw->wc.status == IB_WC_SUCCESS);
	EXPECT(rw->wc.wc_flags & IB_WC_WITH_INVALIDATE);
	EXPECT(!(rw->wc.wc_flags & IB_WC_WITH_IMM));
	EXPECT(rw->wc.ex.invalidate_rkey == rkey);
	/* Invalidating it again locally (the peer came first) is done at once. */
	err = kv_local_inv(ibdev, b, rw, rkey);
	if (err)
		goto unmap;
	EXPECT(rw->wc.status == IB_WC_SUCCESS);

	/* A key that names another region is refused at post. */
	{
		struct ib_reg_wr reg = { .wr.opcode = IB_WR_REG_MR, .mr = mr,
					 .key = mr->rkey + 0x100, .access = IB_ACCESS_LOCAL_WRITE };

		EXPECT(kv_post(b, sw, &reg.wr) == -EINVAL);
	}
	/* Registered again, under a new key; a registration of a's own is used, then LOCAL_INV. */
	err = kv_reg_mr(ibdev, b, sw, mr);
	if (err)
		goto unmap;
	EXPECT(mr->rkey != rkey);
	err = kv_rdma(ibdev, a, sw, IB_WR_RDMA_WRITE, src_dma, 16, mr->iova, mr->rkey);
	if (err)
		goto unmap;
	EXPECT(sw->wc.status == IB_WC_SUCCESS);
	err = check_inv_after_use(ibdev, a, sw, rw, src, mr->iova, mr->rkey, region + FRWR_OFF);
	if (err)
		goto unmap;
	err = kv_local_inv(ibdev, b, rw, mr->rkey);
	if (err)
		goto unmap;
	EXPECT(rw->wc.status == IB_WC_SUCCESS && rw->wc.opcode == IB_WC_LOCAL_INV);
	/* The key gives no access now. */
	err = kv_rdma(ibdev, a, sw, IB_WR_RDMA_WRITE, src_dma, 16, mr->iova, mr->rkey);
	if (err)
		goto unmap;
	EXPECT(sw->wc.status == IB_WC_REM_ACCESS_ERR);
unmap:
	ib_dma_unmap_sg(ibdev, &sg, 1, DMA_BIDIRECTIONAL);
dereg:
	ib_dereg_mr(mr);
free_region:
	free_pages((unsigned long)region, 1);
	if (err)
		pr_err("ferroce_kverbs: %s: FRWR: %d\n", dev_name(&ibdev->dev), err);
	return err ?: ret;
}

#define SEND_LEN 3000 /* three packets at a 1024-byte MTU */
#define INLINE_LEN 48

/*
 * SENDs between two connected kernel QPs of @type: data, immediate data and inline data arrive
 * whole; then a receive still posted is flushed by ib_drain_qp(). For RC, a send whose lkey
 * names no region completes with IB_WC_LOC_PROT_ERR first, or with @frwr, check_frwr() runs.
 */
static int check_connected(struct ib_device *ibdev, const struct ib_gid_attr *sgid,
			   enum ib_qp_type type, bool frwr)
{
	struct ib_qp_init_attr init = {
		.qp_type = type,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
	};
	const char *name = type == IB_QPT_RC ? "RC" : "UC";
	struct kv_wait *sw, *rw, *flushed;
	struct ib_qp *a = NULL, *b = NULL;
	u64 src_dma, dst_dma;
	struct ib_cq *cq;
	struct ib_pd *pd;
	u8 *src, *dst;
	int ret = 0; /* a check failed (EXPECT) */
	int err = 0, i; /* a step failed */

	src = kmalloc(PAGE_SIZE, GFP_KERNEL);
	dst = kzalloc(PAGE_SIZE, GFP_KERNEL);
	sw = kzalloc(3 * sizeof(*sw), GFP_KERNEL);
	if (!src || !dst || !sw) {
		err = -ENOMEM;
		goto free_mem;
	}
	rw = sw + 1;
	flushed = sw + 2;
	for (i = 0; i < PAGE_SIZE; i++)
		src[i] = i * 7 + 3;
	src_dma = ib_dma_map_single(ibdev, src, PAGE_SIZE, DMA_TO_DEVICE);
	dst_dma = ib_dma_map_single(ibdev, dst, PAGE_SIZE, DMA_FROM_DEVICE);

	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd)) {
		err = PTR_ERR(pd);
		goto unmap;
	}
	cq = ib_alloc_cq(ibdev, NULL, 32, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(cq)) {
		err = PTR_ERR(cq);
		goto dealloc_pd;
	}
	init.send_cq = cq;
	init.recv_cq = cq;
	a = ib_create_qp(pd, &init);
	b = IS_ERR(a) ? a : ib_create_qp(pd, &init);
	if (IS_ERR(b)) {
		err = PTR_ERR(b);
		pr_err("ferroce_kverbs: %s: %s ib_create_qp: %d\n", dev_name(&ibdev->dev), name,
		       err);
		if (!IS_ERR(a))
			ib_destroy_qp(a);
		a = b = NULL;
		goto free_cq;
	}
	/* Posting before the QP may send (RESET), or receive, fails. */
	EXPECT(kv_post_send(a, sw, IB_WR_SEND, 0, src_dma, 8, pd->local_dma_lkey, 0) == -EINVAL);
	EXPECT(kv_post_recv(b, rw, dst_dma, PAGE_SIZE) == -EINVAL);
	err = kv_connect(a, b->qp_num, sgid) ?: kv_connect(b, a->qp_num, sgid);
	if (err) {
		pr_err("ferroce_kverbs: %s: %s connect: %d\n", dev_name(&ibdev->dev), name, err);
		goto destroy;
	}

	/* UC has no SEND with invalidate: refused at post. */
	if (type == IB_QPT_UC)
		EXPECT(kv_post_send(a, sw, IB_WR_SEND_WITH_INV, 0, src_dma, 8, pd->local_dma_lkey,
				    0) == -EINVAL);

	/* Three packets with immediate data. */
	err = kv_post_recv(b, rw, dst_dma, PAGE_SIZE) ?:
	      kv_post_send(a, sw, IB_WR_SEND_WITH_IMM, 0, src_dma, SEND_LEN,
			   pd->local_dma_lkey, cpu_to_be32(0x12345678));
	if (err || !kv_wait_done(ibdev, sw, "a SEND") || !kv_wait_done(ibdev, rw, "a receive")) {
		err = err ?: -ETIMEDOUT;
		goto destroy;
	}
	EXPECT(sw->wc.status == IB_WC_SUCCESS && sw->wc.opcode == IB_WC_SEND && sw->wc.qp == a);
	EXPECT(rw->wc.status == IB_WC_SUCCESS && rw->wc.opcode == IB_WC_RECV && rw->wc.qp == b);
	EXPECT(rw->wc.byte_len == SEND_LEN);
	EXPECT(rw->wc.wc_flags & IB_WC_WITH_IMM);
	EXPECT(rw->wc.ex.imm_data == cpu_to_be32(0x12345678));
	EXPECT(!memcmp(dst, src, SEND_LEN));

	/* Inline: the data is copied as it is posted, its lkey ignored. */
	memset(dst, 0, PAGE_SIZE);
	err = kv_post_recv(b, rw, dst_dma, PAGE_SIZE) ?:
	      kv_post_send(a, sw, IB_WR_SEND, IB_SEND_INLINE, (u64)(uintptr_t)(src + 100),
			   INLINE_LEN, 0, 0);
	if (err || !kv_wait_done(ibdev, sw, "an inline SEND") ||
	    !kv_wait_done(ibdev, rw, "an inline receive")) {
		err = err ?: -ETIMEDOUT;
		goto destroy;
	}
	EXPECT(sw->wc.status == IB_WC_SUCCESS && rw->wc.status == IB_WC_SUCCESS);
	EXPECT(rw->wc.byte_len == INLINE_LEN && !(rw->wc.wc_flags & IB_WC_WITH_IMM));
	EXPECT(!memcmp(dst, src + 100, INLINE_LEN));

	if (frwr) {
		err = check_frwr(ibdev, a, b, sw, rw, src, src_dma, dst, dst_dma);
		if (err)
			goto destroy;
	} else if (type == IB_QPT_RC) {
		/* A key no region has: the WR fails locally, the QP goes to the error state. */
		err = kv_post_send(a, sw, IB_WR_SEND, 0, src_dma, 64, pd->local_dma_lkey ^ 0xff00,
				   0);
		if (err || !kv_wait_done(ibdev, sw, "a SEND with a bad lkey")) {
			err = err ?: -ETIMEDOUT;
			goto destroy;
		}
		EXPECT(sw->wc.status == IB_WC_LOC_PROT_ERR);
	}
	/* A receive left posted, flushed when the QP drains (or at once, in the error state). */
	err = kv_post_recv(b, flushed, dst_dma, PAGE_SIZE);
	if (err)
		goto destroy;
	ib_drain_qp(a);
	ib_drain_qp(b);
	EXPECT(try_wait_for_completion(&flushed->done));
	EXPECT(flushed->wc.status == IB_WC_WR_FLUSH_ERR && flushed->wc.qp == b);
destroy:
	ib_destroy_qp(a);
	ib_destroy_qp(b);
free_cq:
	ib_free_cq(cq);
dealloc_pd:
	ib_dealloc_pd(pd);
unmap:
	ib_dma_unmap_single(ibdev, src_dma, PAGE_SIZE, DMA_TO_DEVICE);
	ib_dma_unmap_single(ibdev, dst_dma, PAGE_SIZE, DMA_FROM_DEVICE);
free_mem:
	kfree(sw);
	kfree(dst);
	kfree(src);
	if (err)
		pr_err("ferroce_kverbs: %s: %s QPs: %d\n", dev_name(&ibdev->dev), name, err);
	return err ?: ret;
}

/* Kernel RC and UC QPs, or with @frwr fast registration, on the device's first IPv4 RoCE v2 GID. */
static int check_kernel_qps(struct ib_device *ibdev, bool frwr)
{
	const struct ib_gid_attr *sgid = ipv4_roce_v2_gid(ibdev);
	int ret;

	if (!sgid) {
		pr_err("ferroce_kverbs: %s: no RoCE v2 GID of an IPv4 address\n",
		       dev_name(&ibdev->dev));
		return -ENODEV;
	}
	if (frwr) {
		ret = check_connected(ibdev, sgid, IB_QPT_RC, true);
	} else {
		ret = check_connected(ibdev, sgid, IB_QPT_RC, false);
		ret = check_connected(ibdev, sgid, IB_QPT_UC, false) ?: ret;
	}
	rdma_put_gid_attr(sgid);
	return ret;
}

/* The core calls this for every registered device, under its client lock: the checks run
 * here, on the device named, while it cannot go away.
 */
static int kverbs_add(struct ib_device *ibdev)
{
	if (!dev || strcmp(dev_name(&ibdev->dev), dev))
		return -EOPNOTSUPP;
	found = true;
	result = 0;
	if (!only || !strcmp(only, "ah"))
		result = check_query_ah(ibdev);
	if (!only || !strcmp(only, "qps"))
		result = check_kernel_qps(ibdev, false) ?: result;
	if (!only || !strcmp(only, "frwr"))
		result = check_kernel_qps(ibdev, true) ?: result;
	return -EOPNOTSUPP;
}

static void kverbs_remove(struct ib_device *ibdev, void *data)
{
}

static struct ib_client kverbs_client = {
	.name = "ferroce_kverbs",
	.add = kverbs_add,
	.remove = kverbs_remove,
};

static int __init kverbs_init(void)
{
	int ret = ib_register_client(&kverbs_client);

	if (ret)
		return ret;
	ib_unregister_client(&kverbs_client);
	if (!found) {
		pr_err("ferroce_kverbs: no device %s\n", dev ?: "(none given)");
		return -ENODEV;
	}
	return result;
}

static void __exit kverbs_exit(void)
{
}

module_init(kverbs_init);
module_exit(kverbs_exit);
MODULE_DESCRIPTION("kernel verbs checks for ferroce's selftests");
MODULE_LICENSE("GPL");
