// SPDX-License-Identifier: GPL-2.0

#include <linux/inetdevice.h>
#include <net/addrconf.h>

#ifdef CONFIG_INET

__rust_helper struct in_device *rust_helper___in_dev_get_rtnl(const struct net_device *dev)
{
	return __in_dev_get_rtnl(dev);
}

__rust_helper void rust_helper_in_dev_hold(struct in_device *in_dev)
{
	in_dev_hold(in_dev);
}

__rust_helper void rust_helper_in_dev_put(struct in_device *in_dev)
{
	in_dev_put(in_dev);
}

#endif

#if IS_ENABLED(CONFIG_IPV6)

__rust_helper struct inet6_dev *rust_helper_in6_dev_get(const struct net_device *dev)
{
	return in6_dev_get(dev);
}

__rust_helper void rust_helper_in6_dev_put(struct inet6_dev *idev)
{
	in6_dev_put(idev);
}

#endif
