#[allow(unused_mut)]
fn lstm(mut m: &Lstm, mut xs: &[Tensor], mut ys: &[Tensor]) -> Tensor {
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
            function: "lstm",
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
            has_loop: true,
        });
        let __janus_w_janus_ret = ::janus::__private::Witness::new();
        match __JANUS_FRAGMENT
            .enter(
                || [
                    (&::janus::__private::Probe(&m)).probe("m"),
                    (&::janus::__private::Probe(&xs)).probe("xs"),
                    (&::janus::__private::Probe(&ys)).probe("ys"),
                ],
                ::janus::__private::Instance::of(&|| ()),
            )
        {
            ::janus::__private::Enter::Body(__janus_scope) => {
                let (__janus_o_janus_ret,) = {
                    #[allow(clippy::redundant_closure_call)]
                    let __janus_ret = (|| -> Tensor {
                        #[allow(non_snake_case)]
                        let __janus_v_janus_tail;
                        {
                            #[allow(unused_imports)]
                            use ::janus::__private::{
                                FixedMutRef as _, FixedOther as _, InOutModule as _,
                                InOutOpaque as _, InOutRef as _, OutputModule as _,
                                OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
                            };
                            static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
                                function: "lstm",
                                file: ::core::file!(),
                                line: ::core::line!(),
                                more_lines: 11u32,
                                index: 1u32,
                                part: 0u32,
                                profile: 2u32,
                                max_variants: 8u32,
                                min_ops: 3u32,
                                speculative: false,
                                max_failures: 3u32,
                                dynamic_dims: true,
                                has_loop: true,
                            });
                            let __janus_w_janus_tail = ::janus::__private::Witness::new();
                            match __JANUS_FRAGMENT
                                .enter(
                                    || [
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&m.wh)).probe("m.wh"),
                                            || (&::janus::__private::Probe(&m)).probe("m"),
                                        ),
                                        (&::janus::__private::Probe(&xs)).probe("xs"),
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&m.wx)).probe("m.wx"),
                                            || (&::janus::__private::Probe(&m)).probe("m"),
                                        ),
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&m.b)).probe("m.b"),
                                            || (&::janus::__private::Probe(&m)).probe("m"),
                                        ),
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&m.wy)).probe("m.wy"),
                                            || (&::janus::__private::Probe(&m)).probe("m"),
                                        ),
                                        ::janus::__private::probe_or(
                                            (&::janus::__private::Probe(&m.by)).probe("m.by"),
                                            || (&::janus::__private::Probe(&m)).probe("m"),
                                        ),
                                        (&::janus::__private::Probe(&ys)).probe("ys"),
                                    ],
                                    ::janus::__private::Instance::of(&|| ()),
                                )
                            {
                                ::janus::__private::Enter::Body(__janus_scope) => {
                                    let (__janus_o_janus_tail,) = {
                                        let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
                                        let mut h = Tensor::zeros([bsz, hid]);
                                        let mut c = Tensor::zeros([bsz, hid]);
                                        let mut loss = Tensor::scalar(0.0);
                                        for mut t in 0..xs.len() {
                                            {
                                                #[allow(unused_imports)]
                                                use ::janus::__private::{
                                                    FixedMutRef as _, FixedOther as _, InOutModule as _,
                                                    InOutOpaque as _, InOutRef as _, OutputModule as _,
                                                    OutputOpaque as _, ProbeKeyed as _, ProbeOpaque as _,
                                                };
                                                static __JANUS_FRAGMENT: ::janus::__private::Fragment = ::janus::__private::Fragment::new(::janus::__private::Site {
                                                    function: "lstm",
                                                    file: ::core::file!(),
                                                    line: ::core::line!(),
                                                    more_lines: 4u32,
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
                                                match __JANUS_FRAGMENT
                                                    .enter(
                                                        || [
                                                            (&::janus::__private::Probe(&xs[t])).probe("xs[t]"),
                                                            ::janus::__private::probe_or(
                                                                (&::janus::__private::Probe(&m.wx)).probe("m.wx"),
                                                                || (&::janus::__private::Probe(&m)).probe("m"),
                                                            ),
                                                            (&::janus::__private::Probe(&h)).probe("h"),
                                                            ::janus::__private::probe_or(
                                                                (&::janus::__private::Probe(&m.wh)).probe("m.wh"),
                                                                || (&::janus::__private::Probe(&m)).probe("m"),
                                                            ),
                                                            ::janus::__private::probe_or(
                                                                (&::janus::__private::Probe(&m.b)).probe("m.b"),
                                                                || (&::janus::__private::Probe(&m)).probe("m"),
                                                            ),
                                                            (&::janus::__private::Probe(&c)).probe("c"),
                                                            (&::janus::__private::Probe(&loss)).probe("loss"),
                                                            ::janus::__private::probe_or(
                                                                (&::janus::__private::Probe(&m.wy)).probe("m.wy"),
                                                                || (&::janus::__private::Probe(&m)).probe("m"),
                                                            ),
                                                            ::janus::__private::probe_or(
                                                                (&::janus::__private::Probe(&m.by)).probe("m.by"),
                                                                || (&::janus::__private::Probe(&m)).probe("m"),
                                                            ),
                                                            (&::janus::__private::Probe(&ys[t])).probe("ys[t]"),
                                                        ],
                                                        ::janus::__private::Instance::of(&|| ()),
                                                    )
                                                {
                                                    ::janus::__private::Enter::Body(__janus_scope) => {
                                                        {
                                                            ::janus::__private::branch(1u32, 6u32, true);
                                                            let mut g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
                                                            let [i, f, gg, o] = g.chunk::<4>(1);
                                                            c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
                                                            h = o.sigmoid() * c.tanh();
                                                            loss = loss
                                                                + (h.matmul(&m.wy) + &m.by).cross_entropy(&ys[t]);
                                                        }
                                                        __janus_scope
                                                            .exit(
                                                                ::std::vec![
                                                                    (&& & ::janus::__private::Witness::of(& c)).output(& c,
                                                                    "c"), (&& & ::janus::__private::Witness::of(& h)).output(&
                                                                    h, "h"), (&& & ::janus::__private::Witness::of(& loss))
                                                                    .output(& loss, "loss")
                                                                ],
                                                            );
                                                    }
                                                    ::janus::__private::Enter::Replay(mut __janus_out) => {
                                                        (&&&::janus::__private::Witness::of(&c))
                                                            .restore(&mut c, &mut __janus_out);
                                                        (&&&::janus::__private::Witness::of(&h))
                                                            .restore(&mut h, &mut __janus_out);
                                                        (&&&::janus::__private::Witness::of(&loss))
                                                            .restore(&mut loss, &mut __janus_out);
                                                    }
                                                }
                                            }
                                        }
                                        let __janus_tail = loss / xs.len() as f64;
                                        __janus_w_janus_tail.bind(&__janus_tail);
                                        (__janus_tail,)
                                    };
                                    __janus_scope
                                        .exit(
                                            ::std::vec![
                                                (&& & __janus_w_janus_tail).output(& __janus_o_janus_tail,
                                                "return value")
                                            ],
                                        );
                                    __janus_v_janus_tail = __janus_o_janus_tail;
                                }
                                ::janus::__private::Enter::Replay(mut __janus_out) => {
                                    __janus_v_janus_tail = (&&&__janus_w_janus_tail)
                                        .take(&mut __janus_out);
                                }
                            }
                        }
                        #[allow(unused_variables, non_snake_case)]
                        let mut __janus_tail = __janus_v_janus_tail;
                        __janus_tail
                    })();
                    __janus_w_janus_ret.bind(&__janus_ret);
                    (__janus_ret,)
                };
                __janus_scope
                    .exit(
                        ::std::vec![
                            (&& & __janus_w_janus_ret).output(& __janus_o_janus_ret,
                            "return value")
                        ],
                    );
                __janus_v_janus_ret = __janus_o_janus_ret;
            }
            ::janus::__private::Enter::Replay(mut __janus_out) => {
                __janus_v_janus_ret = (&&&__janus_w_janus_ret).take(&mut __janus_out);
            }
        }
    }
    #[allow(unused_variables, non_snake_case)]
    let mut __janus_ret = __janus_v_janus_ret;
    __janus_ret
}
