#[allow(unused_mut)]
fn train_step(
    mut m: &mut Mlp,
    mut opt: &mut optim::Adam,
    mut x: &Tensor,
    mut y: &Tensor,
) -> f32 {
    #[allow(non_snake_case)]
    let __janus_v_loss;
    #[allow(
        unused_mut,
        unused_variables,
        unused_assignments,
        unused_imports,
        unreachable_code,
        non_snake_case,
        clippy::all
    )]
    {
        use ::janus::rt::{
            FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _,
            InOutRef as _, OutputModule as _, OutputModuleRef as _, OutputOpaque as _,
            ProbeKeyed as _, ProbeOpaque as _,
        };
        static __JANUS_FRAGMENT: ::janus::rt::Fragment = ::janus::rt::Fragment::new(::janus::rt::Site {
            function: "train_step",
            file: ::core::file!(),
            line: ::core::line!(),
            index: 0u32,
            profile: 2u32,
            max_variants: 8u32,
            min_ops: 3u32,
        });
        let __janus_w_loss = ::janus::rt::Witness::new();
        match __JANUS_FRAGMENT
            .enter(
                || {
                    ::std::vec![
                        (& ::janus::rt::Probe(& m.l1)).probe("m.l1"), (&
                        ::janus::rt::Probe(& x)).probe("x"), (& ::janus::rt::Probe(& m
                        .l2)).probe("m.l2"), (& ::janus::rt::Probe(& y)).probe("y")
                    ]
                },
                &[],
            )
        {
            ::janus::rt::Enter::Body(__janus_scope) => {
                let (__janus_o_loss,) = {
                    let mut h = m.l1.forward(x).tanh();
                    let mut loss = m.l2.forward(&h).cross_entropy(y);
                    __janus_w_loss.bind(&loss);
                    (loss,)
                };
                __janus_scope
                    .exit(
                        ::std::vec![
                            (&& & __janus_w_loss).output(& __janus_o_loss, "loss")
                        ],
                    );
                __janus_v_loss = __janus_o_loss;
            }
            ::janus::rt::Enter::Replay(mut __janus_out) => {
                __janus_v_loss = (&&&__janus_w_loss).take(&mut __janus_out);
            }
        }
    }
    #[allow(unused_variables, non_snake_case)]
    let mut loss = __janus_v_loss;
    let mut grads = loss.backward();
    #[allow(
        unused_mut,
        unused_variables,
        unused_assignments,
        unused_imports,
        unreachable_code,
        non_snake_case,
        clippy::all
    )]
    {
        use ::janus::rt::{
            FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _,
            InOutRef as _, OutputModule as _, OutputModuleRef as _, OutputOpaque as _,
            ProbeKeyed as _, ProbeOpaque as _,
        };
        static __JANUS_FRAGMENT: ::janus::rt::Fragment = ::janus::rt::Fragment::new(::janus::rt::Site {
            function: "train_step",
            file: ::core::file!(),
            line: ::core::line!(),
            index: 1u32,
            profile: 2u32,
            max_variants: 8u32,
            min_ops: 3u32,
        });
        match __JANUS_FRAGMENT
            .enter(
                || {
                    ::std::vec![
                        (& ::janus::rt::Probe(& opt)).probe("opt"), (&
                        ::janus::rt::Probe(& m)).probe("m"), (& ::janus::rt::Probe(&
                        grads)).probe("grads")
                    ]
                },
                &[],
            )
        {
            ::janus::rt::Enter::Body(__janus_scope) => {
                let () = {
                    opt.step(m, &grads);
                    ()
                };
                __janus_scope
                    .exit(
                        ::std::vec![
                            (&& & ::janus::rt::Witness::of(& opt)).inout_output(& opt,
                            "opt"), (&& & ::janus::rt::Witness::of(& m)).inout_output(&
                            m, "m")
                        ],
                    );
            }
            ::janus::rt::Enter::Replay(mut __janus_out) => {
                (&&&::janus::rt::Witness::of(&opt))
                    .inout_restore(&mut opt, &mut __janus_out);
                (&&&::janus::rt::Witness::of(&m))
                    .inout_restore(&mut m, &mut __janus_out);
            }
        }
    }
    loss.item()
}
