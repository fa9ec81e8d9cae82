//! The kubelet's words for a finished pull (`pkg/kubelet/images/image_manager.go`): one home,
//! `podvisor_api::pod`, shared with the lifecycle core's `Pulled` event.

pub use podvisor_api::pod::image_pulled_message as pulled_message;
