#[allow(unused_mut)]
fn train_step(
    mut m: &mut Mlp,
    mut opt: &mut optim::Adam,
    mut x: &Tensor,
    mut y: &Tensor,
) -> f32 {
    #[allow(non_snake_case)]
    let __janus_v_janus_ret;
    {
        #[allow(unused_imports)]
        use ::janus::__private::{
            FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _,
            InOutRef as _, OutputModule as _, OutputOpaque as _, ProbeKeyed as _,
            ProbeOpaque as _,
        };
        static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
            function: "train_step",
            file: ::core::file!(),
            line: ::core::line!(),
            more_lines: 0u32,
            index: 2u32,
            part: 0u32,
            profile: 2u32,
            max_variants: 8u32,
            min_ops: 3u32,
            speculative: true,
            max_failures: 3u32,
            dynamic_dims: true,
            has_loop: false,
        });
        let __janus_w_janus_ret = ::janus::__private::Witness::new();
        match __JANUS_FRAGMENT
            .enter(
                || [
                    (&::janus::__private::Probe(&m)).probe("m"),
                    (&::janus::__private::Probe(&opt)).probe("opt"),
                    (&::janus::__private::Probe(&x)).probe("x"),
                    (&::janus::__private::Probe(&y)).probe("y"),
                ],
                ::janus::__private::Instance::of(&|| ()),
            )
        {
            ::janus::__private::Enter::Body(__janus_scope) => {
                let (__janus_o_janus_ret,) = {
                    #[allow(clippy::redundant_closure_call)]
                    let __janus_ret = (|| -> ::janus::Tensor {
                        #[allow(non_snake_case)]
                        let __janus_v_loss;
                        {
                            #[allow(unused_imports)]
                            use ::janus::__private::{
                                FixedMutRef as _, FixedOther as _, InOutModule as _,
                                InOutOpaque as _, InOutRef as _, OutputModule as _,
                                OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
                            };
                            static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
                                function: "train_step",
                                file: ::core::file!(),
                                line: ::core::line!(),
                                more_lines: 1u32,
                                index: 0u32,
                                part: 0u32,
                                profile: 2u32,
                                max_variants: 8u32,
                                min_ops: 3u32,
                                speculative: false,
                                max_failures: 3u32,
                                dynamic_dims: true,
                                has_loop: false,
                            });
                            let __janus_w_loss = ::janus::__private::Witness::new();
                            match __JANUS_FRAGMENT
                                .enter(
                                    || [
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&m.l1)).probe("m.l1"),
                                            || (&::janus::__private::Probe(&m)).probe("m"),
                                        ),
                                        (&::janus::__private::Probe(&x)).probe("x"),
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&m.l2)).probe("m.l2"),
                                            || (&::janus::__private::Probe(&m)).probe("m"),
                                        ),
                                        (&::janus::__private::Probe(&y)).probe("y"),
                                    ],
                                    ::janus::__private::Instance::of(&|| ()),
                                )
                            {
                                ::janus::__private::Enter::Body(__janus_scope) => {
                                    let (__janus_o_loss,) = {
                                        let mut h = m.l1.forward(x).tanh();
                                        let mut loss = m.l2.forward(&h).cross_entropy(y);
                                        __janus_w_loss.bind(&loss);
                                        (loss,)
                                    };
                                    __janus_scope
                                        .exit(
                                            ::std::vec![
                                                (&& & ::janus::__private::Witness::of(& m.l1))
                                                .inout_output(& m.l1, "m.l1"), (&& &
                                                ::janus::__private::Witness::of(& m.l2)).inout_output(& m
                                                .l2, "m.l2"), (&& & __janus_w_loss).output(& __janus_o_loss,
                                                "loss")
                                            ],
                                        );
                                    __janus_v_loss = __janus_o_loss;
                                }
                                ::janus::__private::Enter::Replay(mut __janus_out) => {
                                    (&&&::janus::__private::Witness::of(&m.l1))
                                        .inout_restore(&mut m.l1, &mut __janus_out);
                                    (&&&::janus::__private::Witness::of(&m.l2))
                                        .inout_restore(&mut m.l2, &mut __janus_out);
                                    __janus_v_loss = (&&&__janus_w_loss).take(&mut __janus_out);
                                }
                            }
                        }
                        #[allow(unused_variables, non_snake_case)]
                        let mut loss = __janus_v_loss;
                        let mut grads = loss.backward();
                        {
                            #[allow(unused_imports)]
                            use ::janus::__private::{
                                FixedMutRef as _, FixedOther as _, InOutModule as _,
                                InOutOpaque as _, InOutRef as _, OutputModule as _,
                                OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
                            };
                            static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
                                function: "train_step",
                                file: ::core::file!(),
                                line: ::core::line!(),
                                more_lines: 0u32,
                                index: 1u32,
                                part: 0u32,
                                profile: 2u32,
                                max_variants: 8u32,
                                min_ops: 3u32,
                                speculative: false,
                                max_failures: 3u32,
                                dynamic_dims: true,
                                has_loop: false,
                            });
                            match __JANUS_FRAGMENT
                                .enter(
                                    || [
                                        (&::janus::__private::Probe(&opt)).probe("opt"),
                                        (&::janus::__private::Probe(&m)).probe("m"),
                                        (&::janus::__private::Probe(&grads)).probe("grads"),
                                    ],
                                    ::janus::__private::Instance::of(&|| ()),
                                )
                            {
                                ::janus::__private::Enter::Body(__janus_scope) => {
                                    {
                                        opt.step(m, &grads);
                                    }
                                    __janus_scope
                                        .exit(
                                            ::std::vec![
                                                (&& & ::janus::__private::Witness::of(& opt)).inout_output(&
                                                opt, "opt"), (&& & ::janus::__private::Witness::of(& m))
                                                .inout_output(& m, "m")
                                            ],
                                        );
                                }
                                ::janus::__private::Enter::Replay(mut __janus_out) => {
                                    (&&&::janus::__private::Witness::of(&opt))
                                        .inout_restore(&mut opt, &mut __janus_out);
                                    (&&&::janus::__private::Witness::of(&m))
                                        .inout_restore(&mut m, &mut __janus_out);
                                }
                            }
                        }
                        ::janus::__private::tail_tensor(&loss)
                    })();
                    __janus_w_janus_ret.bind(&__janus_ret);
                    (__janus_ret,)
                };
                __janus_scope
                    .exit(
                        ::std::vec![
                            (&& & ::janus::__private::Witness::of(& m)).inout_output(& m,
                            "m"), (&& & ::janus::__private::Witness::of(& opt))
                            .inout_output(& opt, "opt"), (&& & __janus_w_janus_ret)
                            .output(& __janus_o_janus_ret, "return value")
                        ],
                    );
                __janus_v_janus_ret = __janus_o_janus_ret;
            }
            ::janus::__private::Enter::Replay(mut __janus_out) => {
                (&&&::janus::__private::Witness::of(&m))
                    .inout_restore(&mut m, &mut __janus_out);
                (&&&::janus::__private::Witness::of(&opt))
                    .inout_restore(&mut opt, &mut __janus_out);
                __janus_v_janus_ret = (&&&__janus_w_janus_ret).take(&mut __janus_out);
            }
        }
    }
    #[allow(unused_variables, non_snake_case)]
    let mut __janus_ret = __janus_v_janus_ret;
    let __janus_reads = (__janus_ret,);
    __janus_reads.0.item()
}
