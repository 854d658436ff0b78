// SPDX-License-Identifier: GPL-2.0

#include <linux/if_vlan.h>
#include <linux/netdevice.h>

#ifdef CONFIG_NET

__rust_helper void rust_helper_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

__rust_helper void rust_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

__rust_helper bool rust_helper_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

__rust_helper bool rust_helper_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

__rust_helper bool rust_helper_is_vlan_dev(const struct net_device *dev)
{
	return is_vlan_dev(dev);
}

__rust_helper struct net_device *
rust_helper_netdev_notifier_info_to_dev(const struct netdev_notifier_info *info)
{
	return netdev_notifier_info_to_dev(info);
}

/* `reg_state` is a bit-field, which bindgen cannot read. */
__rust_helper u8 rust_helper_netdev_reg_state(const struct net_device *dev)
{
	return dev->reg_state;
}

#endif
