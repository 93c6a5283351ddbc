//! The address of a partition of a running job.

use std::fmt;
use std::sync::Arc;

/// Where a partition of a running job is: its topic, the consumer group reading it, and its
/// number (from 0).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionAddr {
    /// The topic.
    pub topic: Arc<str>,
    /// The consumer group of the pipeline reading it.
    pub group: Arc<str>,
    /// The partition.
    pub partition: u32,
}

impl PartitionAddr {
    /// Partition `partition` of `topic`, read by group `group`.
    pub fn new(topic: &str, group: &str, partition: u32) -> Self {
        PartitionAddr {
            topic: topic.into(),
            group: group.into(),
            partition,
        }
    }

    /// Whether this is partition `partition` of `topic` read by `group`.
    pub(crate) fn is(&self, topic: &str, group: &str, partition: u32) -> bool {
        self.partition == partition && &*self.topic == topic && &*self.group == group
    }
}

impl fmt::Display for PartitionAddr {
    /// `partition {n} of `{topic}` (group `{group}`)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partition {} of `{}` (group `{}`)",
            self.partition, self.topic, self.group
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_reads_as_partition_topic_and_group() {
        let addr = PartitionAddr::new("orders", "billing", 3);
        assert_eq!(
            addr.to_string(),
            "partition 3 of `orders` (group `billing`)"
        );
    }
}
