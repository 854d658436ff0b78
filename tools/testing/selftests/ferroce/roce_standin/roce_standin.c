// SPDX-License-Identifier: GPL-2.0
/*
 * roce_standin: a stand-in for a hardware RoCE device, for ferroce's selftests (the test
 * machines have no RoCE NIC). It registers an ib_device with a hardware driver id and one
 * RoCE v2 port bound to the netdev named by its parameter, the way mlx5 or irdma bind theirs
 * (ib_device_set_netdev). It moves no data: verbs are absent, so no consumer opens it (no
 * MAD or CM capability on the port, no user verbs).
 *
 *   insmod roce_standin.ko netdev=NAME [driver_id=N]   (NAME in the initial namespace)
 */
#include <linux/module.h>
#include <linux/netdevice.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>

static char *netdev;
module_param(netdev, charp, 0444);
MODULE_PARM_DESC(netdev, "the netdev whose RoCE the stand-in serves (initial namespace)");

static uint driver_id = RDMA_DRIVER_MLX5;
module_param(driver_id, uint, 0444);
MODULE_PARM_DESC(driver_id, "its enum rdma_driver_id (default: RDMA_DRIVER_MLX5)");

struct standin_dev {
	struct ib_device ibdev;
};

static struct standin_dev *standin;

/* As mlx5 does: the port lets go of its netdev when the netdev goes, or unregistering it
 * would wait forever for our reference.
 */
static int standin_netdev_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct net_device *ours = ib_device_get_netdev(&standin->ibdev, 1);

	if (event == NETDEV_UNREGISTER && ndev == ours)
		ib_device_set_netdev(&standin->ibdev, NULL, 1);
	dev_put(ours);
	return NOTIFY_DONE;
}

static struct notifier_block standin_nb = {
	.notifier_call = standin_netdev_event,
};

static int standin_query_device(struct ib_device *dev, struct ib_device_attr *attr,
				struct ib_udata *udata)
{
	return 0;
}

static int standin_query_port(struct ib_device *dev, u32 port, struct ib_port_attr *attr)
{
	attr->state = IB_PORT_ACTIVE;
	attr->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
	attr->max_mtu = IB_MTU_1024;
	attr->active_mtu = IB_MTU_1024;
	attr->gid_tbl_len = 16;
	return 0;
}

static int standin_get_port_immutable(struct ib_device *dev, u32 port,
				      struct ib_port_immutable *immutable)
{
	/* RoCE v2 only: no MAD or CM, so neither opens a QP on it. */
	immutable->core_cap_flags = RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP;
	immutable->gid_tbl_len = 16;
	return 0;
}

static enum rdma_link_layer standin_get_link_layer(struct ib_device *dev, u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int standin_add_gid(const struct ib_gid_attr *attr, void **context)
{
	return 0;
}

static int standin_del_gid(const struct ib_gid_attr *attr, void **context)
{
	return 0;
}

static struct ib_device_ops standin_ops = {
	.owner = THIS_MODULE,
	.uverbs_abi_ver = 1,
	.query_device = standin_query_device,
	.query_port = standin_query_port,
	.get_port_immutable = standin_get_port_immutable,
	.get_link_layer = standin_get_link_layer,
	.add_gid = standin_add_gid,
	.del_gid = standin_del_gid,
};

static int __init standin_init(void)
{
	struct net_device *ndev;
	int err;

	if (!netdev)
		return -EINVAL;
	ndev = dev_get_by_name(&init_net, netdev);
	if (!ndev)
		return -ENODEV;
	standin = ib_alloc_device(standin_dev, ibdev);
	if (!standin) {
		err = -ENOMEM;
		goto put;
	}
	standin_ops.driver_id = driver_id;
	ib_set_device_ops(&standin->ibdev, &standin_ops);
	standin->ibdev.node_type = RDMA_NODE_IB_CA;
	standin->ibdev.phys_port_cnt = 1;
	standin->ibdev.num_comp_vectors = 1;
	err = ib_device_set_netdev(&standin->ibdev, ndev, 1);
	if (!err)
		err = ib_register_device(&standin->ibdev, "roce_standin%d", NULL);
	if (!err) {
		err = register_netdevice_notifier(&standin_nb);
		if (err)
			ib_unregister_device(&standin->ibdev);
	}
	if (err) {
		ib_dealloc_device(&standin->ibdev);
		goto put;
	}
	pr_info("roce_standin: %s serves RoCE on %s (driver id %u)\n",
		dev_name(&standin->ibdev.dev), netdev, driver_id);
put:
	dev_put(ndev);
	return err;
}

/*
 * As mlx5_ib does: the device goes first, still bound to its netdev, so that RDMA clients see
 * which netdev it served. (Unregistering the notifier first would replay NETDEV_UNREGISTER to
 * it for every netdev, and let go of the netdev before.)
 */
static void __exit standin_exit(void)
{
	ib_unregister_device(&standin->ibdev);
	unregister_netdevice_notifier(&standin_nb);
	ib_dealloc_device(&standin->ibdev);
}

module_init(standin_init);
module_exit(standin_exit);
MODULE_DESCRIPTION("A stand-in hardware RoCE device for ferroce's selftests");
MODULE_LICENSE("GPL");
