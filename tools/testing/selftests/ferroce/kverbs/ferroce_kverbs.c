// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_kverbs: verbs that only kernel consumers reach, run against one device for
 * ferroce's selftests. Loading runs the checks; a check that does not hold fails the load
 * (-EINVAL, with a log line naming it), so a loaded module has passed.
 *
 *   insmod ferroce_kverbs.ko dev=NAME   (NAME has a RoCE v2 GID of an IPv4 address)
 *
 * Checks: an address handle reads back as it was created (rdma_query_ah).
 */
#include <linux/module.h>
#include <linux/string.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev;
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the RDMA device to check");

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

/* The core calls this for every registered device, under its client lock: the checks run
 * here, on the device named, while it cannot go away.
 */
static int kverbs_add(struct ib_device *ibdev)
{
	if (!dev || strcmp(dev_name(&ibdev->dev), dev))
		return -EOPNOTSUPP;
	found = true;
	result = check_query_ah(ibdev);
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
