//! Example code shared by the rows of one feature, as string literals for `concat!` (each
//! row's example is a doctest of its own).

/// The broadcast function of the `broadcast`, `connect` and `process` rows' examples: an
/// amount over the limit that the broadcast stream sets, per user.
macro_rules! limits_function {
    () => {
        r#"
// Amounts over the limit the broadcast stream sets.
const LIMITS: BroadcastStateDescriptor<&'static str, u64> = BroadcastStateDescriptor::new("limits");
struct OverLimit;
impl KeyedBroadcastProcessFunction<&'static str, (&'static str, u64), (&'static str, u64), &'static str, u64>
    for OverLimit
{
    type Out = String;
    fn process_element(
        &mut self,
        (user, amount): (&'static str, u64),
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, &'static str, &'static str, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        if let Some(limit) = ctx.broadcast_state()?.get(&"limit").filter(|l| amount > **l) {
            out.collect(format!("{user}: {amount} > {limit}"));
        }
        Ok(())
    }
    fn process_broadcast_element(
        &mut self,
        (name, limit): (&'static str, u64),
        ctx: &mut BroadcastContext<'_, '_, &'static str, &'static str, u64>,
        _out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.broadcast_state()?.put(name, limit);
        Ok(())
    }
}"#
    };
}
pub(crate) use limits_function;
