// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 UDP sockets: one IPv4 and one IPv6 socket on port 4791 per network namespace,
//! opened by the first device there and closed with the last one (or with the namespace).

pub(crate) mod recv;
pub(crate) mod xmit;

use self::recv::Receiver;
use crate::proto::ROCE_V2_UDP_PORT;
use kernel::{
    net::{
        namespace::{Namespace, Pernet, PernetId},
        netdevice::NetDevice,
        udp_tunnel::{Family, UdpTunnelSocket},
    },
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

type Socket = UdpTunnelSocket<Receiver>;

/// The sockets of one namespace and how many devices use them.
struct Ports {
    users: usize,
    v4: Option<Socket>,
    v6: Option<Socket>,
    /// The namespace is being dismantled: no new users.
    gone: bool,
}

impl Ports {
    fn take_sockets(&mut self) -> (Option<Socket>, Option<Socket>) {
        (self.v4.take(), self.v6.take())
    }
}

/// A namespace's port state; shared with its users, so a device that outlives its namespace
/// (its netdev moved away and its unregistration is still queued) finds the sockets gone.
#[pin_data]
pub(crate) struct NetPorts {
    #[pin]
    ports: Mutex<Ports>,
}

/// The per-namespace slot of [`NetPorts`].
pub(crate) struct RoceNet;

static ROCE_NET_ID: PernetId = PernetId::new();

impl Pernet for RoceNet {
    type Data = Arc<NetPorts>;
    const ID: &'static PernetId = &ROCE_NET_ID;

    fn init(_net: &Namespace) -> impl PinInit<Self::Data, Error> {
        Arc::pin_init(
            pin_init!(NetPorts {
                ports <- new_mutex!(Ports {
                    users: 0,
                    v4: None,
                    v6: None,
                    gone: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    fn exit(_net: &Namespace, data: &Self::Data) {
        // The sockets must not outlive the namespace; late users find them gone.
        let sockets = {
            let mut ports = data.ports.lock();
            ports.gone = true;
            ports.take_sockets()
        };
        drop(sockets);
    }
}

/// One device's use of its namespace's sockets; the last one closes them.
pub(crate) struct PortsUse(Arc<NetPorts>);

impl PortsUse {
    /// Opens the sockets of `netdev`'s namespace if this is its first device.
    pub(crate) fn get(netdev: &NetDevice) -> Result<Self> {
        let net = netdev.net().ok_or(ENODEV)?;
        let ports = net.data::<RoceNet>().ok_or(ENODEV)?.clone();
        {
            let mut p = ports.ports.lock();
            if p.gone {
                return Err(ENODEV);
            }
            if p.v4.is_none() {
                p.v4 = Some(Socket::new(&net, Family::Inet, ROCE_V2_UDP_PORT)?);
                p.v6 = match Socket::new(&net, Family::Inet6, ROCE_V2_UDP_PORT) {
                    Ok(s) => Some(s),
                    // IPv6 disabled at boot or built out: IPv4 alone still works.
                    Err(e) if e == EAFNOSUPPORT || e == EPFNOSUPPORT => None,
                    Err(e) => {
                        let sockets = p.take_sockets();
                        drop(p);
                        drop(sockets);
                        return Err(e);
                    }
                };
            }
            p.users += 1;
        }
        Ok(Self(ports))
    }

    /// Whether these are the sockets of the namespace `netdev` is in now (a netdev that moved
    /// while its device was being set up is in another).
    pub(crate) fn serves(&self, netdev: &NetDevice) -> bool {
        netdev
            .net()
            .and_then(|net| {
                net.data::<RoceNet>()
                    .map(|ports| Arc::ptr_eq(ports, &self.0))
            })
            .unwrap_or(false)
    }
}

impl Drop for PortsUse {
    fn drop(&mut self) {
        let sockets = {
            let mut p = self.0.ports.lock();
            // Every `PortsUse` counted itself in `get`.
            p.users -= 1;
            if p.users == 0 {
                p.take_sockets()
            } else {
                (None, None)
            }
        };
        drop(sockets);
    }
}
